//! One node of a cluster in its own process: [`VerbsNode`] registers only this node's
//! memory, makes the queue pairs of its threads and the responders its peers' threads
//! connect to, describes them in a [`NodeInfo`], and connects them to the peers' once every
//! peer's information has arrived (through a rendezvous, as opaque bytes).
//!
//! Queue pairs, per ordered pair of nodes (a, b), both possibly the same node, and per
//! thread t: a requester of a's thread t towards b, connected to a responder of b made for
//! (a, t). A node therefore holds `threads × nodes` requesters and `nodes × threads`
//! responders; its own node is one of the nodes (loopback over its GID).

use super::connection::{Connection, Lane, RemoteQp, bring_up, create_responder, to_error};
use super::device::{Device, VerbsOptions};
use super::endpoint::VerbsEndpoint;
use super::error::VerbsError;
use super::host::Host;
use super::info::{NodeInfo, PeerInfo};
use super::memory::{Memory, WordAddress};
use super::plan::check_plan;
use crate::error::RdmaError;
use crate::ids::{Loc, NodeId};
use crate::layout::Layout;
use crate::plan::Grant;
use sideway::ibverbs::address::Gid;
use sideway::ibverbs::completion::ExtendedCompletionQueue;
use sideway::ibverbs::queue_pair::{ExtendedQueuePair, QueuePair};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

mod absent;

/// Where connecting stands.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Connected {
    /// Not tried yet: every queue pair is in the RESET state.
    No,
    /// Every queue pair is in RTS; per node, its information (where its memory is for
    /// the NIC: address of word 0, rkeys).
    Yes(Vec<PeerInfo>),
    /// A verbs call failed half-way: the node cannot be used.
    Failed,
}

/// One node of a cluster whose other nodes run in other processes (or in this one: any
/// number of `VerbsNode`s may share a device).
///
/// Use: [`VerbsNode::open`], send [`VerbsNode::local_info`] (as
/// [`NodeInfo::to_bytes`]) to every peer and collect theirs, [`VerbsNode::connect`], then
/// one [`VerbsNode::endpoint`] per thread. Endpoints' CPU operations act on this node's
/// words; their remote operations reach every node's words (this node's too) through the
/// rkeys of the [`NodeInfo`]s.
#[derive(Debug)]
pub struct VerbsNode {
    /// Per thread: its requesters and completion queue, or `None` while an endpoint has
    /// them. Declared before the responders, the memory and the device, which go after.
    lanes: Mutex<Vec<Option<Lane>>>,
    /// `responders[m][t]`: the responder for thread `t` of node `m` (replaced when a new
    /// process takes `m`'s place: [`VerbsEndpoint::rejoin`]).
    responders: Mutex<Vec<Vec<ExtendedQueuePair>>>,
    /// `requesters[m][t]`: the queue-pair number of thread `t`'s requester towards node
    /// `m` (kept here: the lanes come and go with endpoints).
    requesters: Mutex<Vec<Vec<u32>>>,
    /// The completion queue of the responders (which post nothing: it stays empty). Only
    /// held, so that it outlives them (declared after them).
    #[allow(dead_code)]
    responder_cq: Arc<ExtendedCompletionQueue>,
    /// This node's registered words only. Before `device`: the region is deregistered
    /// before the protection domain goes.
    memory: Memory,
    device: Device,
    options: VerbsOptions,
    id: NodeId,
    threads: u16,
    connected: Mutex<Connected>,
    /// The peers without information at the connection ([`VerbsNode::connect_reached`]):
    /// their queue pairs unconnected, parked, until one is met late
    /// ([`VerbsEndpoint::connect_late`]).
    absent: Mutex<BTreeSet<u16>>,
    /// Operations executed by endpoints that have been dropped.
    ops: AtomicU64,
    /// When the node was made: the zero of its clock (`Op::Now`).
    started: Instant,
}

impl VerbsNode {
    /// Node `id` of `layout`, with `threads` threads, on the first RDMA device with the
    /// default options.
    ///
    /// # Errors
    /// As [`VerbsNode::with_options`].
    pub fn open(layout: Layout, id: NodeId, threads: u16) -> Result<VerbsNode, VerbsError> {
        VerbsNode::with_options(layout, id, threads, VerbsOptions::default())
    }

    /// Node `id` of `layout`, with `threads` threads, on the device the options name, its
    /// memory registered as `plan` says (see [`Grant`]): one memory region per grant, with
    /// only the remote access it grants, and one over all its words with local access
    /// only. Peers reach a granted range with its own key, which
    /// [`VerbsNode::local_info_for`] gives only to the peers the grant is for; any other
    /// remote access to this node's words is posted with a key that does not allow it, and
    /// fails on the NIC ([`RdmaError::RemoteAccess`], which breaks the queue pair).
    ///
    /// # Errors
    /// [`VerbsError::BadPlan`] for a grant that is empty, outside the node's words, for a
    /// node not in the layout, or overlapping another; otherwise as
    /// [`VerbsNode::with_options`].
    pub fn with_plan(
        layout: Layout,
        id: NodeId,
        threads: u16,
        plan: &[Grant],
        options: VerbsOptions,
    ) -> Result<VerbsNode, VerbsError> {
        if !layout.has_node(id) {
            return Err(VerbsError::UnknownNode { node: id });
        }
        check_plan(&layout, id, plan)?;
        VerbsNode::build(layout, id, threads, Some(plan), options)
    }

    /// Node `id` of `layout`, with `threads` threads (every node of the cluster must run
    /// as many), on the device the options name: registers this node's zeroed words and
    /// makes its queue pairs, in the RESET state until [`VerbsNode::connect`].
    ///
    /// # Errors
    /// [`VerbsError::UnknownNode`] if `id` is not a node of `layout`,
    /// [`VerbsError::NoThreads`] for no threads, [`VerbsError::NoDevice`] on a machine
    /// without RDMA, [`VerbsError::DeviceNotFound`] for a device name not in the list, and
    /// [`VerbsError::Verbs`] when the device fails.
    pub fn with_options(
        layout: Layout,
        id: NodeId,
        threads: u16,
        options: VerbsOptions,
    ) -> Result<VerbsNode, VerbsError> {
        VerbsNode::build(layout, id, threads, None, options)
    }

    /// [`VerbsNode::with_options`] (no plan) or [`VerbsNode::with_plan`] (a checked plan).
    fn build(
        layout: Layout,
        id: NodeId,
        threads: u16,
        plan: Option<&[Grant]>,
        options: VerbsOptions,
    ) -> Result<VerbsNode, VerbsError> {
        if !layout.has_node(id) {
            return Err(VerbsError::UnknownNode { node: id });
        }
        if threads == 0 {
            return Err(VerbsError::NoThreads);
        }
        let device = Device::open(&options)?;
        let memory = match plan {
            None => Memory::register_node(layout, &device.pd, id)?,
            Some(plan) => Memory::register_planned(layout, &device.pd, id, plan)?,
        };
        let layout = memory.layout();
        let lanes = (0..threads)
            .map(|thread| Lane::unconnected(&device, layout, options.queue_depth, thread).map(Some))
            .collect::<Result<Vec<_>, _>>()?;
        let responder_cq = device
            .context
            .create_cq_builder()
            .setup_cqe(1)
            .build_ex()
            .map_err(|e| VerbsError::verbs("ibv_create_cq_ex", e))?;
        let responders = layout
            .node_ids()
            .map(|_| {
                (0..threads)
                    .map(|_| create_responder(&device, &responder_cq))
                    .collect::<Result<Vec<_>, _>>()
            })
            .collect::<Result<Vec<_>, _>>()?;
        let requesters = layout
            .node_ids()
            .map(|target| {
                lanes
                    .iter()
                    .flatten()
                    .map(|lane| lane.connections[target.index()].qp_number())
                    .collect()
            })
            .collect();
        let node = VerbsNode {
            lanes: Mutex::new(lanes),
            responders: Mutex::new(responders),
            requesters: Mutex::new(requesters),
            responder_cq,
            memory,
            device,
            options,
            id,
            threads,
            connected: Mutex::new(Connected::No),
            absent: Mutex::new(BTreeSet::new()),
            ops: AtomicU64::new(0),
            started: Instant::now(),
        };
        assert_eq!(
            lock(&node.responders).len(),
            usize::from(node.layout().nodes())
        );
        assert!(node.memory.has_node(id));
        Ok(node)
    }

    /// This node's id.
    pub fn id(&self) -> NodeId {
        self.id
    }

    /// The layout of the cluster's memory (this node holds only its own words of it).
    pub fn layout(&self) -> &Layout {
        self.memory.layout()
    }

    /// How many threads the node runs (endpoints 0 to `threads - 1`).
    pub fn threads(&self) -> u16 {
        self.threads
    }

    /// The options the node was built with.
    pub fn options(&self) -> &VerbsOptions {
        &self.options
    }

    /// The name of the device in use (`rxe0`, ...).
    pub fn device_name(&self) -> &str {
        &self.device.name
    }

    /// Whether [`VerbsNode::connect`] has succeeded.
    pub fn is_connected(&self) -> bool {
        matches!(*lock(&self.connected), Connected::Yes(_))
    }

    /// What peers need to connect to this node: its GID, its region's address and rkey,
    /// and the queue-pair numbers of its requesters and responders. For a node opened
    /// with a region plan the rkey grants no remote access: peers need
    /// [`VerbsNode::local_info_for`].
    pub fn local_info(&self) -> NodeInfo {
        let region = self.memory.region_key(self.id);
        let info = NodeInfo {
            node: self.id,
            nodes: self.layout().nodes(),
            words: self.layout().words(self.id),
            threads: self.threads,
            gid: self.device.gid.raw,
            lid: self.device.lid,
            addr: region.addr,
            rkey: region.key,
            responders: lock(&self.responders)
                .iter()
                .map(|row| row.iter().map(QueuePair::qp_number).collect())
                .collect(),
            requesters: lock(&self.requesters).clone(),
        };
        debug_assert!(info.check_shape().is_ok());
        info
    }

    /// What `peer` needs to connect to this node: [`VerbsNode::local_info`] plus the
    /// ranges of the region plan granted to every node or to `peer`, with their keys
    /// (none without a plan). Hand it to `peer`'s [`VerbsNode::connect_peers`].
    pub fn local_info_for(&self, peer: NodeId) -> PeerInfo {
        let info = PeerInfo {
            info: self.local_info(),
            ranges: self.memory.range_keys(self.id, peer),
        };
        debug_assert!(info.check_ranges().is_ok());
        info
    }

    /// Connects every queue pair of this node to its counterpart: this node's requesters
    /// to the peers' responders made for them, and this node's responders to the peers'
    /// requesters, moving each to RTS. `peers` holds every other node's information by
    /// node id (as a rendezvous returns it); an entry for this node itself may be there if
    /// it is this node's own information. Everything is checked before any queue pair
    /// moves, so after an error other than [`VerbsError::Verbs`] the node can try again.
    ///
    /// # Errors
    /// [`VerbsError::MissingPeer`] for a node of the layout without information;
    /// [`VerbsError::UnknownNode`] for an id the layout does not have;
    /// [`VerbsError::PeerMismatch`], [`VerbsError::NodeCountMismatch`],
    /// [`VerbsError::WordCountMismatch`], [`VerbsError::ThreadCountMismatch`] and
    /// [`VerbsError::BadNodeInfo`] for information that does not fit this node's layout
    /// and threads; [`VerbsError::AlreadyConnected`] on a second call; a verbs error if a
    /// queue pair cannot be moved (the node is unusable then).
    pub fn connect(&mut self, peers: &BTreeMap<u16, NodeInfo>) -> Result<(), VerbsError> {
        let peers = peers
            .iter()
            .map(|(&key, info)| (key, PeerInfo::from(info.clone())))
            .collect();
        self.connect_peers(&peers)
    }

    /// [`VerbsNode::connect`] with every peer's [`PeerInfo`] (from its
    /// [`VerbsNode::local_info_for`] this node): remote operations towards a peer's word
    /// use the key of the range holding it, or the peer's region key. This node's own
    /// information, if there, may be its [`VerbsNode::local_info_for`] itself or its
    /// [`VerbsNode::local_info`] without ranges; either way this node reaches its own
    /// words with the ranges granted to itself.
    ///
    /// # Errors
    /// As [`VerbsNode::connect`]; [`VerbsError::BadNodeInfo`] also for a range outside
    /// its node's words.
    pub fn connect_peers(&mut self, peers: &BTreeMap<u16, PeerInfo>) -> Result<(), VerbsError> {
        self.connect_known(peers, false)
    }

    /// [`VerbsNode::connect_peers`], except that the nodes `peers` does not hold are
    /// `absent`-allowed: their queue pairs stay unconnected and this node's requesters
    /// towards them refuse every request ([`RdmaError::QueuePairError`], as a broken queue
    /// pair does), until each is met late ([`VerbsEndpoint::connect_late`]).
    fn connect_known(
        &mut self,
        peers: &BTreeMap<u16, PeerInfo>,
        absent_allowed: bool,
    ) -> Result<(), VerbsError> {
        if *lock(&self.connected) != Connected::No {
            return Err(VerbsError::AlreadyConnected);
        }
        let (infos, absent) = self.check_peers(peers, absent_allowed)?;
        *lock(&self.connected) = Connected::Failed;
        let me = self.id.index();
        let lanes = self.lanes.get_mut().unwrap_or_else(PoisonError::into_inner);
        for (target, info) in infos.iter().map(|peer| &peer.info).enumerate() {
            if absent.contains(&info.node.0) {
                for lane in lanes.iter_mut() {
                    let lane = lane.as_mut().expect("no endpoint while connecting");
                    lane.connections[target].park();
                }
                continue;
            }
            let gid = Gid { raw: info.gid };
            for (thread, lane) in lanes.iter_mut().enumerate() {
                let lane = lane.as_mut().expect("no endpoint while connecting");
                let qpn = info.responders[me][thread];
                lane.connections[target].connect_to(
                    &self.device,
                    RemoteQp {
                        gid,
                        lid: info.lid,
                        qpn,
                    },
                )?;
            }
            let responders = self
                .responders
                .get_mut()
                .unwrap_or_else(PoisonError::into_inner);
            for (thread, responder) in responders[target].iter_mut().enumerate() {
                let qpn = info.requesters[me][thread];
                let remote = RemoteQp {
                    gid,
                    lid: info.lid,
                    qpn,
                };
                bring_up(responder, &self.device, remote)?;
            }
        }
        assert_eq!(infos.len(), usize::from(self.layout().nodes()));
        assert!(absent_allowed || absent.is_empty(), "every peer connected");
        *lock(&self.connected) = Connected::Yes(infos);
        *lock(&self.absent) = absent;
        Ok(())
    }

    /// Every node's information, by node, this node's own included, after checking that
    /// `peers` fits this node.
    fn check_peers(
        &self,
        peers: &BTreeMap<u16, PeerInfo>,
        absent_allowed: bool,
    ) -> Result<(Vec<PeerInfo>, BTreeSet<u16>), VerbsError> {
        let own = self.local_info_for(self.id);
        for (&key, peer) in peers {
            let info = &peer.info;
            if !self.layout().has_node(NodeId(key)) {
                return Err(VerbsError::UnknownNode { node: NodeId(key) });
            }
            if info.node != NodeId(key) || (info.node == self.id && *info != own.info) {
                return Err(VerbsError::PeerMismatch {
                    key,
                    found: info.node,
                });
            }
        }
        let mut infos = Vec::with_capacity(usize::from(self.layout().nodes()));
        let mut absent = BTreeSet::new();
        for node in self.layout().node_ids() {
            let peer = if node == self.id {
                own.clone()
            } else if let Some(peer) = peers.get(&node.0) {
                peer.clone()
            } else if absent_allowed {
                absent.insert(node.0);
                self.placeholder(node)
            } else {
                return Err(VerbsError::MissingPeer { node });
            };
            self.check_peer(node, &peer)?;
            infos.push(peer);
        }
        assert_eq!(infos.len(), usize::from(self.layout().nodes()));
        Ok((infos, absent))
    }

    /// The checks a peer's information passes before any queue pair is made for it after
    /// the connection (a new process in its place, a peer met late): `peer` is a node of
    /// the layout other than this one, this node is connected, and `info` is `peer`'s and
    /// fits ([`VerbsNode::check_peer`]).
    fn check_newcomer(&self, peer: NodeId, info: &PeerInfo) -> Result<(), VerbsError> {
        if peer == self.id || !self.layout().has_node(peer) {
            return Err(VerbsError::UnknownNode { node: peer });
        }
        if !self.is_connected() {
            return Err(VerbsError::NotConnected);
        }
        if info.info.node != peer {
            return Err(VerbsError::PeerMismatch {
                key: peer.0,
                found: info.info.node,
            });
        }
        self.check_peer(peer, info)
    }

    /// Checks that `peer`, the information of `node`, fits this node's layout and threads.
    fn check_peer(&self, node: NodeId, peer: &PeerInfo) -> Result<(), VerbsError> {
        let info = &peer.info;
        if info.nodes != self.layout().nodes() {
            return Err(VerbsError::NodeCountMismatch {
                node,
                expected: self.layout().nodes(),
                found: info.nodes,
            });
        }
        if info.words != self.layout().words(node) {
            return Err(VerbsError::WordCountMismatch {
                node,
                expected: self.layout().words(node),
                found: info.words,
            });
        }
        if info.threads != self.threads {
            return Err(VerbsError::ThreadCountMismatch {
                node,
                expected: self.threads,
                found: info.threads,
            });
        }
        info.check_shape()?;
        peer.check_ranges()?;
        Ok(())
    }

    /// The endpoint of thread `thread` (one at a time per thread: dropping it hands the
    /// thread's queue pairs back for the next).
    ///
    /// # Errors
    /// [`VerbsError::NotConnected`] before a successful [`VerbsNode::connect`],
    /// [`VerbsError::UnknownThread`] for a thread the node does not have and
    /// [`VerbsError::ThreadBusy`] while the thread's previous endpoint is alive.
    pub fn endpoint(&self, thread: u16) -> Result<VerbsEndpoint<'_>, VerbsError> {
        if !self.is_connected() {
            return Err(VerbsError::NotConnected);
        }
        let mut lanes = self.lanes.lock().unwrap_or_else(PoisonError::into_inner);
        let slot = lanes
            .get_mut(usize::from(thread))
            .ok_or(VerbsError::UnknownThread {
                thread,
                threads: self.threads,
            })?;
        let lane = slot.take().ok_or(VerbsError::ThreadBusy { thread })?;
        drop(lanes);
        assert_eq!(lane.thread, thread);
        Ok(VerbsEndpoint::new(self, self.id, lane))
    }

    /// Reads this node's word at `loc`, for inspection (not an operation of any thread).
    ///
    /// # Errors
    /// [`RdmaError::NotLocal`] for a word of another node, and the layout's checks.
    pub fn read(&self, loc: Loc) -> Result<u64, RdmaError> {
        Ok(self.own_word(loc)?.load(Ordering::SeqCst))
    }

    /// Writes `value` into this node's word at `loc`, for initialisation (not an operation
    /// of any thread).
    ///
    /// # Errors
    /// As [`VerbsNode::read`].
    pub fn write(&self, loc: Loc, value: u64) -> Result<(), RdmaError> {
        self.own_word(loc)?.store(value, Ordering::SeqCst);
        Ok(())
    }

    /// A copy of this node's words.
    pub fn words(&self) -> Vec<u64> {
        self.memory.words(self.id)
    }

    /// How many operations the endpoints of this node have executed, counting only the
    /// endpoints that have been dropped.
    pub fn ops(&self) -> u64 {
        self.ops.load(Ordering::SeqCst)
    }

    fn own_word(&self, loc: Loc) -> Result<&AtomicU64, RdmaError> {
        if loc.node != self.id {
            return Err(RdmaError::NotLocal { loc, node: self.id });
        }
        self.memory.word(loc)
    }
}

/// `mutex`'s value; a poisoned lock's too (nothing it guards is left half-changed).
fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Host for VerbsNode {
    fn layout(&self) -> &Layout {
        self.memory.layout()
    }

    fn word(&self, loc: Loc) -> Result<&AtomicU64, RdmaError> {
        self.own_word(loc)
    }

    fn local(&self, loc: Loc) -> WordAddress {
        assert_eq!(loc.node, self.id, "a local operand on another node");
        self.memory.local(loc)
    }

    fn remote(&self, loc: Loc) -> WordAddress {
        let Connected::Yes(infos) = &*lock(&self.connected) else {
            unreachable!("endpoints exist only once connected");
        };
        let address = super::endpoint::peer_address(&infos[loc.node.index()], loc);
        debug_assert!(loc.node != self.id || address.addr == self.memory.remote(loc).addr);
        address
    }

    /// Every node's information as connected now: endpoints address remote words by
    /// their own copy of it (no lock on the data path).
    fn peers(&self) -> Option<Vec<PeerInfo>> {
        match &*lock(&self.connected) {
            Connected::Yes(infos) => Some(infos.clone()),
            _ => None,
        }
    }

    /// Connects a new process in `peer`'s place (its information `info`) to `thread` of
    /// this node: a new requester on `cq` (the thread's completion queue), connected to
    /// the new process's responder for this node, and a new responder for it, connected to
    /// its requester; the old ones are destroyed, so the old process can no longer reach
    /// this node's memory nor be reached. Returns the new requester's connection, *parked*
    /// (it refuses every request until [`Connection::unpark`]), and what the new process
    /// needs to connect to this node.
    fn replace_peer(
        &self,
        peer: NodeId,
        thread: u16,
        cq: &Arc<ExtendedCompletionQueue>,
        info: &PeerInfo,
    ) -> Result<(Connection, PeerInfo), VerbsError> {
        self.check_newcomer(peer, info)?;
        if self.threads != 1 {
            return Err(VerbsError::BadNodeInfo {
                reason: format!(
                    "a new process joins nodes of one thread only (this one runs {})",
                    self.threads
                ),
            });
        }
        let (me, t) = (self.id.index(), usize::from(thread));
        let far = |qpn| remote_qp(info, qpn);
        let mut connection =
            Connection::unconnected(&self.device, cq, peer, self.options.queue_depth)?;
        connection.connect_to(&self.device, far(info.info.responders[me][t]))?;
        let mut responder = create_responder(&self.device, &self.responder_cq)?;
        bring_up(
            &mut responder,
            &self.device,
            far(info.info.requesters[me][t]),
        )?;
        lock(&self.requesters)[peer.index()][t] = connection.qp_number();
        // The old responder goes (destroyed): the old process's requests fail.
        lock(&self.responders)[peer.index()][t] = responder;
        if let Connected::Yes(infos) = &mut *lock(&self.connected) {
            infos[peer.index()] = info.clone();
        }
        connection.park();
        // A peer absent at the connection is no longer: its new process is connected here.
        lock(&self.absent).remove(&peer.0);
        let mine = self.local_info_for(peer);
        assert_eq!(
            mine.info.requesters[peer.index()][t],
            connection.qp_number()
        );
        Ok((connection, mine))
    }

    fn retire_responders(&self, peer: NodeId) -> Result<(), VerbsError> {
        if peer == self.id || !self.layout().has_node(peer) {
            return Err(VerbsError::UnknownNode { node: peer });
        }
        for responder in &mut lock(&self.responders)[peer.index()] {
            to_error(responder)?;
        }
        Ok(())
    }

    fn is_absent(&self, peer: NodeId) -> bool {
        lock(&self.absent).contains(&peer.0)
    }

    fn connect_absent(
        &self,
        peer: NodeId,
        thread: u16,
        connection: &mut Connection,
        info: &PeerInfo,
    ) -> Result<(), VerbsError> {
        self.connect_late(peer, thread, connection, info)
    }

    fn queue_depth(&self) -> u32 {
        self.options.queue_depth
    }

    fn completion_timeout(&self) -> Duration {
        self.options.completion_timeout
    }

    fn now_ns(&self) -> u64 {
        u64::try_from(self.started.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }

    /// The lane goes back to its thread's slot, for the thread's next endpoint.
    fn release(&self, lane: Lane, ops: u64) {
        let mut lanes = self.lanes.lock().unwrap_or_else(PoisonError::into_inner);
        let slot = &mut lanes[usize::from(lane.thread)];
        assert!(slot.is_none(), "two endpoints of one thread");
        *slot = Some(lane);
        self.ops.fetch_add(ops, Ordering::SeqCst);
    }
}

/// The queue pair numbered `qpn` of the node `info` describes, as the fabric reaches it.
fn remote_qp(info: &PeerInfo, qpn: u32) -> RemoteQp {
    RemoteQp {
        gid: Gid { raw: info.info.gid },
        lid: info.info.lid,
        qpn,
    }
}
