//! An RC connection from a thread towards one node: a requester queue pair (the thread's
//! side) connected to a responder queue pair (the target node's side), and posting work
//! requests on it. In the single-process [`VerbsFabric`](super::VerbsFabric) both ends
//! live in the endpoint (loopback over the device's GID); with
//! [`VerbsNode`](super::VerbsNode)s the responder lives in the target node's process.

use super::device::Device;
use super::error::VerbsError;
use super::memory::WordAddress;
use super::request::Verb;
use super::staging::Staging;
use crate::ids::NodeId;
use crate::layout::Layout;
use crate::op::Rmw;
use sideway::ibverbs::AccessFlags;
use sideway::ibverbs::address::{AddressHandleAttribute, Gid};
use sideway::ibverbs::completion::{ExtendedCompletionQueue, GenericCompletionQueue};
use sideway::ibverbs::queue_pair::{
    ExtendedQueuePair, PostSendGuard, QueuePair, QueuePairAttribute, QueuePairState,
    SendOperationFlags, SetInlineData, SetScatterGatherEntry, WorkRequestFlags,
};
use std::sync::{Arc, Mutex, PoisonError};

/// A responder queue pair of the single-process fabric, shared by the endpoint whose
/// requester it serves (which cycles it) and the node whose words it writes (which
/// changes its access: `super::access`).
pub(super) type SharedQp = Arc<Mutex<ExtendedQueuePair>>;

/// Bytes of inline data a requester queue pair accepts: one word for `PutInline`, and a
/// `PutWords` of up to 8 words; a longer one goes through the lane's staging ring.
pub(super) const MAX_INLINE: u32 = 64;
/// The first packet sequence number of both directions.
const FIRST_PSN: u32 = 0;

/// The queue pairs of one endpoint: its completion queue and one connection towards every
/// node of the layout (its own included), indexed by target node.
#[derive(Debug)]
pub(super) struct Lane {
    /// Per target node: the connection towards it. Declared before `cq`, which the queue
    /// pairs report to.
    pub(super) connections: Vec<Connection>,
    /// The completion queue of every requester queue pair of the lane.
    pub(super) cq: Arc<ExtendedCompletionQueue>,
    /// The thread of the node the lane belongs to (0 in the single-process fabric).
    pub(super) thread: u16,
    /// Where long `PutWords` payloads are copied at post.
    pub(super) staging: Staging,
}

impl Lane {
    /// A completion queue and, towards every node of `layout`, a requester queue pair in
    /// the RESET state (connected later with [`Connection::connect_to`]).
    pub(super) fn unconnected(
        device: &Device,
        layout: &Layout,
        depth: u32,
        thread: u16,
    ) -> Result<Lane, VerbsError> {
        let cq = completion_queue(device, layout, depth)?;
        let connections = layout
            .node_ids()
            .map(|target| Connection::unconnected(device, &cq, target, depth))
            .collect::<Result<Vec<_>, _>>()?;
        let lane = Lane {
            connections,
            cq,
            thread,
            staging: Staging::register(&device.pd)?,
        };
        assert_eq!(lane.connections.len(), usize::from(layout.nodes()));
        Ok(lane)
    }

    /// A completion queue and, towards every node of `layout`, a loopback connection (both
    /// queue pairs here, connected to each other).
    pub(super) fn loopback(
        device: &Device,
        layout: &Layout,
        depth: u32,
    ) -> Result<Lane, VerbsError> {
        let cq = completion_queue(device, layout, depth)?;
        let connections = layout
            .node_ids()
            .map(|target| Connection::loopback(device, &cq, target, depth))
            .collect::<Result<Vec<_>, _>>()?;
        let lane = Lane {
            connections,
            cq,
            thread: 0,
            staging: Staging::register(&device.pd)?,
        };
        assert_eq!(lane.connections.len(), usize::from(layout.nodes()));
        Ok(lane)
    }
}

/// A completion queue for the requesters of one lane. At most `depth` requests and one
/// flush are outstanding per queue pair, so it cannot overflow even when every one of
/// them completes with an error (errors produce completions for unsignaled requests too).
fn completion_queue(
    device: &Device,
    layout: &Layout,
    depth: u32,
) -> Result<Arc<ExtendedCompletionQueue>, VerbsError> {
    let cqe = send_queue_slots(depth).saturating_mul(u32::from(layout.nodes()));
    assert!(cqe >= 1);
    device
        .context
        .create_cq_builder()
        .setup_cqe(cqe)
        .build_ex()
        .map_err(|e| VerbsError::verbs("ibv_create_cq_ex", e))
}

/// The send-queue slots of a requester for `depth` outstanding requests: one more, for
/// the flush (see [`super::signaling`]).
fn send_queue_slots(depth: u32) -> u32 {
    depth.saturating_add(1)
}

/// The far end of a connection, as the near end addresses it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct RemoteQp {
    /// The GID of the far end's port.
    pub(super) gid: Gid,
    /// The LID of the far end's port (0 on RoCE, which addresses by GID only).
    pub(super) lid: u16,
    /// The far end's queue-pair number.
    pub(super) qpn: u32,
}

/// Creates an RC queue pair for RDMA WRITE, READ and atomics, with its completions on
/// `cq`: a requester (`send_wr` = the queue depth, inline data) or a responder (one
/// send slot, no inline data: it posts nothing).
pub(super) fn create_qp(
    device: &Device,
    cq: &Arc<ExtendedCompletionQueue>,
    send_wr: u32,
    inline: u32,
) -> Result<ExtendedQueuePair, VerbsError> {
    assert!(send_wr >= 1);
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
}

/// Creates a responder queue pair (in the RESET state) with its completions on `cq`.
pub(super) fn create_responder(
    device: &Device,
    cq: &Arc<ExtendedCompletionQueue>,
) -> Result<ExtendedQueuePair, VerbsError> {
    create_qp(device, cq, 1, 0)
}

/// Moves a queue pair into the error state. A requester's outstanding requests are flushed
/// with an error and later ones refused; a responder no longer executes the requests of
/// the requester it was connected to (that requester's operations fail once its retries
/// run out).
pub(super) fn to_error(qp: &mut ExtendedQueuePair) -> Result<(), VerbsError> {
    let mut error = QueuePairAttribute::new();
    error.setup_state(QueuePairState::Error);
    qp.modify(&error)
        .map_err(|e| VerbsError::verbs("ibv_modify_qp(ERR)", e))?;
    assert_eq!(qp.state(), QueuePairState::Error);
    Ok(())
}

/// A connection from a thread towards `target`: the requester queue pair, and in the
/// single-process fabric the responder it is connected to.
#[derive(Debug)]
pub(super) struct Connection {
    target: NodeId,
    /// Posts the thread's requests; its completions go to the lane's CQ.
    requester: ExtendedQueuePair,
    /// Executes them against the target node's region, when it lives in this endpoint
    /// (the single-process fabric's loopback). It posts nothing itself; the target node
    /// changes its access (`super::access`).
    responder: Option<SharedQp>,
    /// Whether a request failed on the NIC: the requester is then in the error state and
    /// everything later on it fails (flushed).
    broken: bool,
    /// Whether it broke because the target refused a request (a remote access or invalid
    /// request error: a write its permission switch revoked), so that a grant may
    /// reconnect it (`super::access`).
    refused: bool,
    /// Whether it leads to a new process in the target's place that has not connected
    /// its side yet ([`Connection::park`]): refused like a broken one, and not the
    /// process an `Op::Disconnect` of the place means.
    parked: bool,
    /// The bytes of an inline payload as it is copied into its request.
    scratch: Vec<u8>,
}

/// One work request of a doorbell, its addresses checked, as the NIC gets it.
#[derive(Clone, Copy, Debug)]
pub(super) struct WorkRequest<'a> {
    /// Names the request's queue pair and position ([`super::completions::Ticket`]).
    pub(super) wr_id: u64,
    /// The target node (the connection's).
    pub(super) target: NodeId,
    /// Whether it produces a work completion (see [`super::signaling`]).
    pub(super) signaled: bool,
    /// Whether it waits for every earlier READ and atomic of the queue pair (`Rfence`).
    pub(super) fence: bool,
    /// What the NIC does.
    pub(super) verb: Verb,
    /// The remote word (word 0 of a multi-word write), with the key to reach it.
    pub(super) remote: WordAddress,
    /// The local word a put reads, a get or atomic writes, with its local key.
    pub(super) local: Option<WordAddress>,
    /// The words of an inline `PutWords`, copied into the request.
    pub(super) inline: Option<&'a [u64]>,
}

impl WorkRequest<'_> {
    /// Whether the payload is copied into the request (`IBV_SEND_INLINE`).
    fn is_inline(&self) -> bool {
        match self.verb {
            Verb::WriteInline { .. } => true,
            Verb::WriteWords { staged, .. } => staged.is_none(),
            _ => false,
        }
    }

    /// The local buffer the NIC reads or writes, and its length in bytes: a word of the
    /// node's region, or a staged payload.
    fn local_buffer(&self) -> Option<(WordAddress, u32)> {
        match self.verb {
            Verb::WriteWords {
                staged: Some(staged),
                words,
                ..
            } => Some((staged, 8 * words)),
            Verb::WriteWords { staged: None, .. } | Verb::WriteInline { .. } => None,
            Verb::Read { words, .. } => {
                Some((self.local.expect("a read has a local operand"), 8 * words))
            }
            Verb::Write { .. } | Verb::Atomic { .. } => {
                Some((self.local.expect("a verb with a local operand"), 8))
            }
        }
    }
}

impl Connection {
    /// Creates the requester and the responder, with completions on `cq`, and connects
    /// them to each other.
    pub(super) fn loopback(
        device: &Device,
        cq: &Arc<ExtendedCompletionQueue>,
        target: NodeId,
        depth: u32,
    ) -> Result<Connection, VerbsError> {
        let mut connection = Connection::unconnected(device, cq, target, depth)?;
        let mut responder = create_responder(device, cq)?;
        let requester = connection.qp_number();
        connection.connect_to(device, RemoteQp::local(device, responder.qp_number()))?;
        bring_up(&mut responder, device, RemoteQp::local(device, requester))?;
        connection.responder = Some(Arc::new(Mutex::new(responder)));
        assert_eq!(connection.requester.state(), QueuePairState::ReadyToSend);
        Ok(connection)
    }

    /// Creates the requester towards `target`, with completions on `cq`, in the RESET
    /// state.
    pub(super) fn unconnected(
        device: &Device,
        cq: &Arc<ExtendedCompletionQueue>,
        target: NodeId,
        depth: u32,
    ) -> Result<Connection, VerbsError> {
        assert!(depth >= 1);
        let connection = Connection {
            target,
            requester: create_qp(device, cq, send_queue_slots(depth), MAX_INLINE)?,
            responder: None,
            broken: false,
            refused: false,
            parked: false,
            scratch: Vec::new(),
        };
        assert_eq!(connection.requester.state(), QueuePairState::Reset);
        Ok(connection)
    }

    /// The requester's queue-pair number (what the far end connects to).
    pub(super) fn qp_number(&self) -> u32 {
        self.requester.qp_number()
    }

    /// Moves the requester to RTS, connected to the responder `remote`.
    pub(super) fn connect_to(
        &mut self,
        device: &Device,
        remote: RemoteQp,
    ) -> Result<(), VerbsError> {
        bring_up(&mut self.requester, device, remote)?;
        assert_eq!(self.requester.state(), QueuePairState::ReadyToSend);
        Ok(())
    }

    /// Whether a request failed on the NIC, which left the requester in the error state.
    pub(super) fn broken(&self) -> bool {
        self.broken
    }

    /// Refuses every request (as a broken one does) until [`Connection::unpark`]: a
    /// connection to a new process that has not connected its side yet.
    pub(super) fn park(&mut self) {
        self.broken = true;
        self.parked = true;
    }

    /// Whether it is parked: it leads to a process not met yet ([`Connection::park`]).
    pub(super) fn parked(&self) -> bool {
        self.parked
    }

    /// Takes requests again (a parked connection whose far end is ready).
    pub(super) fn unpark(&mut self) {
        assert_eq!(self.requester.state(), QueuePairState::ReadyToSend);
        self.broken = false;
        self.parked = false;
    }

    /// Notes that the requester is in the error state (a completion said so).
    pub(super) fn mark_broken(&mut self) {
        self.broken = true;
    }

    /// Notes that the requester is in the error state because the target refused a
    /// request (see [`Connection::refused`]).
    pub(super) fn mark_refused(&mut self) {
        self.broken = true;
        self.refused = true;
    }

    /// Whether it broke because the target refused a request.
    pub(super) fn refused(&self) -> bool {
        self.refused
    }

    /// The responder of a loopback connection.
    pub(super) fn responder(&self) -> Option<&SharedQp> {
        self.responder.as_ref()
    }

    /// Cycles both queue pairs of a loopback connection through RESET back to RTS,
    /// connected to each other again with every access (a grant): a broken connection
    /// takes requests again. Every request on it must have completed.
    pub(super) fn cycle(&mut self, device: &Device) -> Result<(), VerbsError> {
        let responder = self
            .responder
            .as_ref()
            .expect("only a loopback connection is cycled");
        let mut responder = responder.lock().unwrap_or_else(PoisonError::into_inner);
        for qp in [&mut self.requester, &mut *responder] {
            let mut reset = QueuePairAttribute::new();
            reset.setup_state(QueuePairState::Reset);
            qp.modify(&reset)
                .map_err(|e| VerbsError::verbs("ibv_modify_qp(RESET)", e))?;
        }
        let (near, far) = (self.requester.qp_number(), responder.qp_number());
        bring_up(&mut self.requester, device, RemoteQp::local(device, far))?;
        bring_up(&mut responder, device, RemoteQp::local(device, near))?;
        self.broken = false;
        self.refused = false;
        assert_eq!(self.requester.state(), QueuePairState::ReadyToSend);
        Ok(())
    }

    /// Moves the requester into the error state (fault injection): the NIC flushes its
    /// outstanding requests with an error, and later ones are refused.
    pub(super) fn force_error(&mut self) -> Result<(), VerbsError> {
        to_error(&mut self.requester)?;
        self.broken = true;
        Ok(())
    }

    /// Whether a `PutWords` of `words` words goes inline: its payload fits the requester's
    /// inline data.
    pub(super) fn fits_inline(words: usize) -> bool {
        words.saturating_mul(8) <= MAX_INLINE as usize
    }

    /// Hands `requests` to the NIC as one list, with one doorbell (`ibv_wr_start`, the
    /// requests, `ibv_wr_complete`), each signaled or fenced as it says. `Ok` with how
    /// many; `Err` if the post is refused: then none of them was posted, and the queue
    /// pair is treated as broken.
    pub(super) fn post_list<'a>(
        &mut self,
        requests: impl IntoIterator<Item = WorkRequest<'a>>,
    ) -> Result<u64, String> {
        assert!(!self.broken, "posting on a broken queue pair");
        let mut count = 0;
        let mut guard = self.requester.start_post_send();
        for request in requests {
            assert_eq!(
                request.target, self.target,
                "request on the wrong queue pair"
            );
            let mut flags = if request.signaled {
                WorkRequestFlags::Signaled
            } else {
                WorkRequestFlags::none()
            };
            if request.fence {
                flags |= WorkRequestFlags::Fence;
            }
            if request.is_inline() {
                // Some providers (soft-RoCE's) tell an inline request by this flag, not
                // by `ibv_wr_set_inline_data` alone.
                flags |= WorkRequestFlags::Inline;
            }
            let wr = guard.construct_wr(request.wr_id, flags);
            let remote = request.remote;
            let sge = match request.verb {
                Verb::Write { .. } | Verb::WriteInline { .. } | Verb::WriteWords { .. } => {
                    wr.setup_write(remote.key, remote.addr)
                }
                Verb::Read { .. } => wr.setup_read(remote.key, remote.addr),
                Verb::Atomic {
                    rmw: Rmw::Cas { expected, new },
                    ..
                } => wr.setup_atomic_compare_swap(remote.key, remote.addr, expected, new),
                Verb::Atomic {
                    rmw: Rmw::Faa { add },
                    ..
                } => wr.setup_atomic_fetch_add(remote.key, remote.addr, add),
            };
            // Inline data is copied into the request now (`ibv_wr_set_inline_data`
            // copies it at the call): later changes of the process's words do not matter.
            self.scratch.clear();
            match request.verb {
                Verb::WriteInline { value } => self.scratch.extend(value.to_ne_bytes()),
                Verb::WriteWords {
                    staged: None,
                    words,
                    ..
                } => {
                    let payload = request.inline.expect("an inline payload");
                    assert_eq!(payload.len(), words as usize, "the payload posted");
                    self.scratch
                        .extend(payload.iter().flat_map(|word| word.to_ne_bytes()));
                }
                _ => {}
            }
            match request.local_buffer() {
                // SAFETY: the scatter/gather entry is either one word of this process's
                // registered region of the thread's node, checked against the layout, or
                // a payload in the lane's registered staging ring, whose slots its request
                // holds until its completion is seen; each keyed with its region's lkey.
                // Both regions outlive the endpoint (it borrows the fabric or node that
                // owns the words, and owns the lane), and the endpoint waits for all its
                // requests before it goes away.
                Some((local, length)) => unsafe { sge.setup_sge(local.key, local.addr, length) },
                None => sge.setup_inline_data(&self.scratch),
            }
            count += 1;
        }
        let posted = hand_over(guard).map(|()| count);
        self.broken |= posted.is_err();
        posted
    }

    /// Posts a flush as work request `wr_id`: a signaled zero-length RDMA WRITE to
    /// `remote` (the remote word of the newest put, with its key), whose completion
    /// reports every earlier request of the queue pair complete. `Err` as for
    /// [`Connection::post`].
    pub(super) fn post_flush(&mut self, wr_id: u64, remote: WordAddress) -> Result<(), String> {
        assert!(!self.broken, "flushing a broken queue pair");
        let mut guard = self.requester.start_post_send();
        let wr = guard.construct_wr(wr_id, WorkRequestFlags::Signaled);
        let sge = wr.setup_write(remote.key, remote.addr);
        // SAFETY: an empty scatter/gather list hands the NIC no local memory at all; it
        // is set explicitly because some providers finish building a request only there.
        unsafe { sge.setup_sge_list(&[]) };
        let posted = hand_over(guard);
        self.broken |= posted.is_err();
        posted
    }
}

/// Hands the request built in `guard` to the NIC (`ibv_wr_complete`); `Err` says why the
/// NIC refused it.
fn hand_over(guard: impl PostSendGuard) -> Result<(), String> {
    guard
        .post()
        .map_err(|error| VerbsError::verbs("ibv_wr_complete", error).to_string())
}

impl RemoteQp {
    /// Queue pair `qpn` on this process's own device port (loopback over its GID).
    pub(super) fn local(device: &Device, qpn: u32) -> RemoteQp {
        RemoteQp {
            gid: device.gid,
            lid: device.lid,
            qpn,
        }
    }
}

/// The access flags of a responder queue pair: remote reads and atomics always, remote
/// writes when `write` (`super::access` takes them away and gives them back).
pub(super) fn responder_access(write: bool) -> AccessFlags {
    let access = AccessFlags::LocalWrite | AccessFlags::RemoteRead | AccessFlags::RemoteAtomic;
    if write {
        access | AccessFlags::RemoteWrite
    } else {
        access
    }
}

/// Moves `qp` (in the RESET state) through INIT, RTR and RTS, connected to the queue pair
/// `remote`, with every access.
pub(super) fn bring_up(
    qp: &mut ExtendedQueuePair,
    device: &Device,
    remote: RemoteQp,
) -> Result<(), VerbsError> {
    assert_eq!(
        qp.state(),
        QueuePairState::Reset,
        "bringing up a used queue pair"
    );
    let mut init = QueuePairAttribute::new();
    init.setup_state(QueuePairState::Init)
        .setup_pkey_index(0)
        .setup_port(device.port)
        .setup_access_flags(responder_access(true));
    qp.modify(&init)
        .map_err(|e| VerbsError::verbs("ibv_modify_qp(INIT)", e))?;
    let mut address = AddressHandleAttribute::new();
    address
        .setup_dest_lid(remote.lid)
        .setup_port(device.port)
        .setup_grh_src_gid_index(device.gid_index)
        .setup_grh_dest_gid(&remote.gid)
        .setup_grh_hop_limit(1);
    let mut rtr = QueuePairAttribute::new();
    rtr.setup_state(QueuePairState::ReadyToReceive)
        .setup_path_mtu(device.mtu)
        .setup_dest_qp_num(remote.qpn)
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
