//! A thread's endpoint on a [`VerbsFabric`](super::VerbsFabric) or a
//! [`VerbsNode`](super::VerbsNode): the same request building, completion tracking and
//! [`Endpoint`] implementation for both, against their [`Host`]. The operations that
//! wait for completions are in `waits`.

mod late;
mod posting;
mod regrant;
mod rejoin;
mod retire;
mod waits;

use super::completions::{Completions, Ticket};
use super::connection::{Connection, Lane};
use super::error::VerbsError;
use super::host::Host;
use super::info::PeerInfo;
use super::memory::WordAddress;
use super::request::Request;
use super::signaling::{Signaling, default_interval};
use super::staging::Staging;
use crate::doorbell::{self, Doorbells, WorkRequests};
use crate::endpoint::Endpoint;
use crate::error::RdmaError;
use crate::idle::Backoff;
use crate::ids::{Loc, NodeId, WorkId};
use crate::op::{Op, Reply};
use crate::words::Words;
use sideway::ibverbs::completion::{ExtendedCompletionQueue, PollCompletionQueueError};
use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::sync::atomic::{self, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// The most work completions one poll of the completion queue takes.
const POLL_BATCH: usize = 16;

/// Where the word `loc` of the node `info` describes is for the NIC: its address and the
/// key of the range that holds it.
pub(super) fn peer_address(info: &PeerInfo, loc: Loc) -> WordAddress {
    debug_assert_eq!(loc.node, info.info.node);
    WordAddress {
        addr: info.info.addr + u64::from(loc.offset),
        key: info.rkey_of(loc.offset / 8),
    }
}

/// The node of the queue pair with index `t`.
fn node_of(t: usize) -> NodeId {
    NodeId(u16::try_from(t).expect("node ids are u16"))
}

/// One thread's connection to the cluster; made by
/// [`VerbsFabric::endpoint`](super::VerbsFabric::endpoint) (every node in this process) or
/// [`VerbsNode::endpoint`](super::VerbsNode::endpoint) (one node per process).
///
/// CPU operations (`Load`, `Store`, `Cas`, `Mfence`) act on the registered words of the
/// thread's own node at once, as `SeqCst` atomics; they are the only words this process
/// touches with the CPU. Remote operations are posted as work
/// requests on the endpoint's queue pair towards their target node (RDMA WRITE, inline
/// WRITE, READ, atomic CAS / FAA; a `PutWords` is one RDMA WRITE of all its words) and
/// reply [`Reply::Done`] at once;
/// `Wait`, `Test`, `WaitAny`, `Poll` and `GlobalFence` poll the endpoint's completion
/// queue. `Rfence` sets the fence flag on the next request towards its node.
///
/// # Doorbells
/// Consecutive remote posts are kept per queue pair and handed to the NIC as one list of
/// work requests with one doorbell (`ibv_wr_start` … `ibv_wr_complete`) when the thread
/// issues any operation that is not a remote post or an `Rfence`, or when a list reaches
/// [`DOORBELL_BOUND`](crate::doorbell::DOORBELL_BOUND) requests. This is the model's
/// store buffer: a posted operation may sit there for any time before it enters its queue
/// pair, and since every other operation rings the lists first, nothing can wait for,
/// poll, fence or observe a request still kept (the argument in full:
/// [`crate::doorbell`]). [`ring_doorbells`](VerbsEndpoint::ring_doorbells) rings them at
/// once.
///
/// # Multi-word puts
/// A `PutWords` is one RDMA WRITE work request. A payload that fits the queue pair's
/// inline data (64 bytes, 8 words) is copied into the request (`IBV_SEND_INLINE`) as it
/// goes to the NIC; a longer one is copied when it is posted into the lane's staging
/// ring (16 slots of 4 KiB, registered once per lane), whose slots it holds until its
/// completion is seen; when no run of free slots is long enough, the post rings the
/// lists and reaps completions first. A payload longer than the ring (64 KiB) replies
/// [`RdmaError::Unsupported`] at once. Addresses are checked as the in-process backend
/// checks them: every word in bounds and aligned, the first that is not the failure,
/// reported at the wait, nothing written. Write permission is the NIC's to check: a
/// refused write fails with [`RdmaError::RemoteAccess`] at word 0, writes nothing and
/// breaks the queue pair, as on the in-process backend. Two differences under a region
/// plan, where this backend does not know which ranges are writable: a write that runs
/// past the node's words fails with `OutOfBounds` even when an earlier word is not
/// writable (the in-process backend names that word), and one that crosses from one
/// grant into another cannot be reached with one key and fails whole, with
/// `RemoteAccess` at the first word of the other grant, even when both grant writes.
///
/// # Signaling
/// Gets and atomics are posted signaled; puts mostly unsignaled: one in
/// [`signal_interval`](VerbsEndpoint::signal_interval) in a row is signaled, and so is
/// one on a queue pair with no signaled request outstanding. An unsignaled put completes
/// with the next signaled request of its queue pair; when a wait (or a test, a poll, a
/// global fence, a full send queue, dropping the endpoint) needs a put no signaled
/// request covers, the endpoint posts a *flush*, a signaled zero-length RDMA WRITE, after
/// it. None of this changes what operations reply: every work id completes, a get's or
/// atomic's local word is written when its wait returns, and failures are reported as
/// below, for the operation that failed. [`work_requests`](VerbsEndpoint::work_requests)
/// counts the signaled requests, flushes and doorbells.
///
/// # Failures
/// Exactly as `mem::MemEndpoint` reports them: a remote operation
/// replies `Failed` at post only when its target is not a node of the layout or its local
/// operand is on another node. Any other failure is its completion status, reported once,
/// by the first `Wait` for its work id (as [`RdmaError::WorkFailed`]), `Poll` acknowledging
/// it, or `GlobalFence` towards its target. Misaligned and out-of-bounds addresses are
/// caught before the NIC sees them (they complete as failures in their turn, and the queue
/// pair stays usable); a failure on the NIC (for example retries exhausted:
/// [`RdmaError::RemoteCrashed`]) leaves the queue pair in the error state, and every later
/// operation on it fails with [`RdmaError::QueuePairError`].
///
/// No wait blocks forever: when no completion of an outstanding request arrives for
/// [`VerbsOptions::completion_timeout`](super::VerbsOptions::completion_timeout) (10 s by
/// default), the requests the NIC holds are given up: they fail with
/// [`RdmaError::RemoteCrashed`] (reported as above), their queue pairs go to the error
/// state, and a message on stderr names the endpoint, the target and the count.
///
/// Dropping an endpoint waits until its posted operations have completed (a
/// [`VerbsNode`](super::VerbsNode) then takes the thread's queue pairs back for its next
/// endpoint).
#[derive(Debug)]
pub struct VerbsEndpoint<'f> {
    host: &'f dyn Host,
    node: NodeId,
    /// Per target node: the connection towards it. Declared before `cq`, which the queue
    /// pairs report to.
    connections: Vec<Connection>,
    /// The completion queue of every requester queue pair of the endpoint.
    cq: Arc<ExtendedCompletionQueue>,
    /// The node's thread whose queue pairs these are.
    thread: u16,
    completions: Completions,
    /// Per target node: whether the next request carries the fence flag (`Rfence`).
    fence: Vec<bool>,
    /// Remote operations posted so far.
    seq: u64,
    /// Per target node: operations posted on the queue pair so far.
    posted: Vec<u64>,
    /// Per target node: completions acknowledged by `Poll` so far.
    polled: Vec<u64>,
    /// Per work id not awaited since its last post: per target node, the queue-pair
    /// position of the newest operation with that id (0: none).
    newest: HashMap<WorkId, Vec<u64>>,
    /// Which requests are signaled; the counts of posted and signaled ones.
    signaling: Signaling,
    /// Operations executed so far.
    ops: u64,
    /// How an `Op::Pause` passes: spun, yielded or slept by how long the thread has been
    /// idle (as on the in-process backend, `crate::idle`), so that idle followers leave
    /// the CPU to the leader.
    backoff: Backoff,
    /// Per target node: requests posted and not yet handed to the NIC, oldest first:
    /// kept for the next doorbell, or, beyond the queue depth, waiting for completions to
    /// make room (a post never blocks: a target that stopped answering must not stop
    /// this thread until the completion timeout).
    waiting: Vec<VecDeque<Waiting>>,
    /// The doorbell rule's state (how many requests each list keeps), and the work
    /// requests and doorbells handed to the NIC so far.
    doorbells: Doorbells,
    /// The list being handed over (kept to reuse its room).
    handing: Vec<Waiting>,
    /// Where long `PutWords` payloads are copied at post (the lane's; `None` only once
    /// the endpoint has given the lane back).
    staging: Option<Staging>,
    /// Per target node: requests that waited went to the NIC since its queue pair was
    /// last covered (a wait that began before they did posted no flush for them).
    drained: Vec<bool>,
    /// Where every node's words are for the NIC (a node's endpoint: its own copy of the
    /// peers' information, changed when a new process joins in a peer's place); `None`:
    /// ask the host (the single-process fabric).
    remotes: Option<Vec<PeerInfo>>,
}

/// A request posted and not yet handed to the NIC.
#[derive(Debug)]
struct Waiting {
    ticket: Ticket,
    request: Request,
    /// It carries the fence flag.
    fence: bool,
    /// The words of an inline `PutWords`, copied into the request as it goes to the NIC.
    payload: Option<Words>,
}

impl<'f> VerbsEndpoint<'f> {
    /// An endpoint of a thread of `node` on `host`, over the connected queue pairs of
    /// `lane` (one towards every node of the layout, in RTS). The lane goes back to the
    /// host when the endpoint is dropped.
    pub(super) fn new(host: &'f dyn Host, node: NodeId, lane: Lane) -> VerbsEndpoint<'f> {
        let nodes = usize::from(host.layout().nodes());
        assert!(host.layout().has_node(node));
        assert_eq!(lane.connections.len(), nodes);
        // The lane's previous endpoint saw every one of its requests complete.
        let mut staging = lane.staging;
        staging.reset();
        let endpoint = VerbsEndpoint {
            host,
            node,
            connections: lane.connections,
            cq: lane.cq,
            thread: lane.thread,
            completions: Completions::new(nodes),
            fence: vec![false; nodes],
            seq: 0,
            posted: vec![0; nodes],
            polled: vec![0; nodes],
            newest: HashMap::new(),
            signaling: Signaling::new(nodes, default_interval(host.queue_depth())),
            ops: 0,
            backoff: Backoff::default(),
            waiting: (0..nodes).map(|_| VecDeque::new()).collect(),
            doorbells: Doorbells::new(nodes),
            handing: Vec::new(),
            staging: Some(staging),
            drained: vec![false; nodes],
            remotes: host.peers(),
        };
        assert_eq!(endpoint.fence.len(), nodes);
        endpoint
    }

    /// How many work requests this endpoint has handed to the NIC so far, how many of
    /// them were signaled (flushes included), and in how many doorbells. Requests still
    /// kept for a doorbell are not counted yet.
    pub fn work_requests(&self) -> WorkRequests {
        let counts = self.signaling.counts();
        assert_eq!(counts.posted, self.doorbells.requests());
        WorkRequests {
            doorbells: self.doorbells.doorbells(),
            ..counts
        }
    }

    /// Hands every request kept for a doorbell to the NIC now (as any operation other
    /// than a remote post or an `Rfence` does first; see [`crate::doorbell`]).
    pub fn ring_doorbells(&mut self) {
        self.ring_all();
    }

    /// At most this many puts in a row go unsignaled on a queue pair, less one; a quarter
    /// of the queue depth by default ([`VerbsOptions::queue_depth`]).
    ///
    /// [`VerbsOptions::queue_depth`]: super::VerbsOptions::queue_depth
    pub fn signal_interval(&self) -> u32 {
        self.signaling.interval()
    }

    /// Sets the signal interval for the requests posted from now on; 1 signals every
    /// request (as the backend did before it signaled periodically). An interval above
    /// the queue depth is correct but lets a full send queue hold no signaled request
    /// before the flush a full queue then needs.
    ///
    /// # Panics
    /// If `every` is 0.
    pub fn set_signal_interval(&mut self, every: u32) {
        // The requests kept so far were posted under the old interval.
        self.ring_all();
        self.signaling.set_interval(every);
        assert_eq!(self.signaling.interval(), every);
    }

    /// Puts this endpoint's queue pair towards `node` into the error state, on the NIC:
    /// its outstanding operations fail, and so do later ones, with
    /// [`RdmaError::QueuePairError`] (like
    /// `mem::MemFabric::set_queue_pair_error`,
    /// but for one endpoint's queue pair).
    ///
    /// # Errors
    /// [`VerbsError::UnknownNode`] for a node not in the layout; a verbs error if the
    /// device refuses the state change.
    pub fn set_queue_pair_error(&mut self, node: NodeId) -> Result<(), VerbsError> {
        let target = self
            .queue_pair(node)
            .map_err(|_| VerbsError::UnknownNode { node })?;
        self.ring_all();
        // The NIC reports nothing for an unsignaled request that succeeded before the
        // state change: make a signaled one follow every request first.
        self.cover(target, self.posted[target], true);
        self.connections[target].force_error()?;
        assert!(self.connections[target].broken());
        Ok(())
    }

    /// Where the word at `loc` (a checked location) is for the NIC, with its remote key.
    fn remote(remotes: &Option<Vec<PeerInfo>>, host: &dyn Host, loc: Loc) -> WordAddress {
        match remotes {
            Some(infos) => peer_address(&infos[loc.node.index()], loc),
            None => host.remote(loc),
        }
    }

    /// The word at `loc` for a CPU access by this thread.
    fn local_word(&self, loc: Loc) -> Result<&'f AtomicU64, RdmaError> {
        if loc.node != self.node {
            return Err(RdmaError::NotLocal {
                loc,
                node: self.node,
            });
        }
        self.host.word(loc)
    }

    /// After completions made room: hands the requests waiting towards node index `t` to
    /// the NIC ([`VerbsEndpoint::hand_over`]). Once none waits, the last of them is
    /// covered (a flush if it is an unsignaled put): a wait that began before they
    /// reached the NIC posted no flush for them. While some wait, the send queue is full
    /// and its signaled requests keep completions coming.
    fn submit_waiting(&mut self, t: usize) {
        if self.hand_over(t) {
            self.drained[t] = true;
        }
        let target = node_of(t);
        if self.drained[t] && self.waiting[t].is_empty() {
            // Without a flush on the NIC this covers them now; with one, its completion
            // brings this call back.
            self.cover(t, self.posted[t], false);
            let completed = self.completions.completed(target);
            let covered = self.connections[t].broken()
                || self
                    .signaling
                    .flush_target(t, self.posted[t], completed)
                    .is_none();
            self.drained[t] = !covered;
        }
        let depth = self.host.queue_depth() as usize;
        assert!(
            self.waiting[t].is_empty()
                || self.completions.outstanding(target) >= depth
                || self.connections[t].broken(),
            "requests wait only for a full send queue"
        );
    }

    /// The lane's staging ring.
    fn staging(&mut self) -> &mut Staging {
        self.staging.as_mut().expect("until the endpoint goes")
    }

    /// Polls the completion queue, recording the work completions found (at most
    /// [`POLL_BATCH`]). Whether any of them completed an outstanding request.
    ///
    /// Each work completion is read in its own `ibv_start_poll` / `ibv_end_poll` pair,
    /// never with `ibv_next_poll`: soft-RoCE's provider (rdma-core's `rxe`) advances its
    /// consumer index both in an `ibv_next_poll` that finds the queue empty and in the
    /// `ibv_end_poll` after it, so draining a batch that way moves the consumer index one
    /// past the producer's, and from then on the queue reads as full of stale entries
    /// (old work request ids, forever) while the real completions are skipped.
    /// `ibv_end_poll` after exactly one entry is right for every provider. (Seen in the
    /// soft-RoCE guest: with batch polling, every wait after the first poll hung.)
    fn poll_cq(&mut self) -> bool {
        let mut progress = false;
        for _ in 0..POLL_BATCH {
            let (wr_id, status) = match self.cq.start_poll() {
                // Dropping the poller (`ibv_end_poll`) consumes the one entry read.
                Ok(mut poller) => match poller.next() {
                    Some(wc) => (wc.wr_id(), wc.status()),
                    None => break,
                },
                Err(PollCompletionQueueError::CompletionQueueEmpty) => break,
                // Only a broken completion queue (an overrun, which the queue depth rules
                // out) fails a poll: there is nothing to report it to.
                Err(error) => panic!("polling the completion queue failed: {error}"),
            };
            // `None`: a completion of a request already given up (`expire`), or of a
            // flushed one after it.
            if let Some((target, failed)) = self.completions.work_completion(wr_id, status) {
                progress = true;
                if failed && Request::refusal(status) {
                    self.connections[target.index()].mark_refused();
                } else if failed {
                    self.connections[target.index()].mark_broken();
                }
                self.submit_waiting(target.index());
            }
        }
        if !progress {
            std::hint::spin_loop();
        }
        progress
    }

    /// Polls the completion queue until `ready` holds of the completions, then runs `then`
    /// on them.
    ///
    /// Bounded: if no completion of an outstanding request arrives for the host's
    /// completion timeout while
    /// requests are on the NIC, they are given up ([`VerbsEndpoint::expire`]), so a lost
    /// completion fails the wait with a typed error instead of hanging it.
    fn settle<R>(
        &mut self,
        ready: impl Fn(&Completions) -> bool,
        then: impl FnOnce(&mut Completions) -> R,
    ) -> R {
        let timeout = self.host.completion_timeout();
        let mut deadline = Instant::now() + timeout;
        while !ready(&self.completions) {
            if self.poll_cq() {
                deadline = Instant::now() + timeout;
            } else if Instant::now() >= deadline {
                self.expire(timeout);
                deadline = Instant::now() + timeout;
            }
        }
        then(&mut self.completions)
    }

    /// Gives up on every request the NIC holds after `waited` without a completion: each
    /// queue pair with such requests goes to the error state (the NIC stops using this
    /// process's buffers for them and flushes them; the flushed completions are ignored),
    /// and its requests complete with [`RdmaError::RemoteCrashed`] (a target that does
    /// not answer looks like a crashed one), reported as usual by `Wait`, `Poll` or
    /// `GlobalFence`. Later operations on those queue pairs fail with
    /// [`RdmaError::QueuePairError`].
    fn expire(&mut self, waited: Duration) {
        for (t, connection) in self.connections.iter_mut().enumerate() {
            let node = NodeId(u16::try_from(t).expect("node ids are u16"));
            let in_flight = self.completions.in_flight(node);
            if in_flight == 0 {
                continue;
            }
            eprintln!(
                "velos-rdma verbs: no completion for {waited:?} with {in_flight} request(s) \
                 outstanding on the queue pair of {} thread {} towards {node}: failing them \
                 (RemoteCrashed) and moving the queue pair to the error state",
                self.node, self.thread
            );
            if let Err(error) = connection.force_error() {
                eprintln!("velos-rdma verbs: {error}");
                connection.mark_broken();
            }
            self.completions
                .expire(node, &RdmaError::RemoteCrashed { node });
            assert_eq!(self.completions.in_flight(node), 0);
        }
        // The requests that waited for those queue pairs are refused now (broken).
        for t in 0..self.connections.len() {
            self.submit_waiting(t);
        }
    }

    /// The index of the queue pair towards `node`, if `node` exists.
    fn queue_pair(&self, node: NodeId) -> Result<usize, RdmaError> {
        if self.host.layout().has_node(node) {
            Ok(node.index())
        } else {
            Err(RdmaError::UnknownNode { node })
        }
    }

    fn execute_op(&mut self, op: &Op) -> Result<Reply, RdmaError> {
        let done = |result: Result<(), RdmaError>| result.map(|()| Reply::Done);
        match *op {
            Op::Load { loc } => Ok(Reply::Value(self.local_word(loc)?.load(Ordering::SeqCst))),
            Op::Store { loc, value } => {
                self.local_word(loc)?.store(value, Ordering::SeqCst);
                Ok(Reply::Done)
            }
            Op::LoadWords { loc, count } => {
                crate::copy::load_words(|loc| self.local_word(loc), loc, count)
            }
            Op::StoreWords { loc, ref words } => {
                crate::copy::store_words(|loc| self.local_word(loc), loc, words)
            }
            Op::Cas { loc, expected, new } => Ok(Reply::Value(
                self.local_word(loc)?
                    .compare_exchange(expected, new, Ordering::SeqCst, Ordering::SeqCst)
                    .unwrap_or_else(|actual| actual),
            )),
            Op::Mfence => {
                atomic::fence(Ordering::SeqCst);
                Ok(Reply::Done)
            }
            Op::Put { .. }
            | Op::PutInline { .. }
            | Op::PutWords { .. }
            | Op::Get { .. }
            | Op::GetWords { .. }
            | Op::Atomic { .. } => done(self.post(op)),
            Op::Wait { work_id } => done(self.wait(work_id)),
            Op::WaitAny { base, mask } => self.wait_any(base, mask).map(Reply::Value),
            Op::Test { work_id } => self.test(work_id).map(|c| Reply::Value(u64::from(c))),
            Op::TestLoad { work_id, loc } => match self.test(work_id)? {
                false => Ok(Reply::Done),
                true => Ok(Reply::Value(self.local_word(loc)?.load(Ordering::SeqCst))),
            },
            Op::Poll { node } => done(self.poll(node)),
            Op::Rfence { node } => {
                let target = self.queue_pair(node)?;
                // The fence flag makes the next request wait for every earlier READ and
                // atomic of the queue pair; RC already executes WRITEs in order.
                self.fence[target] = true;
                Ok(Reply::Done)
            }
            Op::GlobalFence { node } => done(self.global_fence(node)),
            Op::Now => Ok(Reply::Value(self.host.now_ns())),
            Op::Pause { ns } => {
                // Spun, yielded or slept by how long the thread has been idle; never
                // asleep longer than asked (see `crate::idle`).
                let host = self.host;
                self.backoff
                    .pause(ns, || host.now_ns(), || false, std::thread::sleep);
                Ok(Reply::Done)
            }
            Op::Disconnect { node } => done(self.disconnect(node)),
            // The responders serving the requesters towards this node change their
            // access; in effect on return (`crate::verbs::access`).
            Op::SetWriteAccess { writers } => done(self.host.set_writers(self.node, writers)),
        }
    }
}

impl Endpoint for VerbsEndpoint<'_> {
    fn node(&self) -> NodeId {
        self.node
    }

    fn execute(&mut self, op: &Op) -> Reply {
        self.ops += 1;
        self.backoff.saw(op);
        if doorbell::rings(op) {
            self.ring_all();
        }
        self.execute_op(op).unwrap_or_else(Reply::Failed)
    }
}

impl Drop for VerbsEndpoint<'_> {
    fn drop(&mut self) {
        self.ring_all();
        // The NIC may still read or write the fabric's words (and the staging ring) for
        // posted requests: wait for them (and the flushes) before the queue pairs go.
        let posted = std::mem::take(&mut self.posted);
        for (t, &upto) in posted.iter().enumerate() {
            self.cover(t, upto, true);
        }
        self.settle(
            |completions| completions.covers(&posted) && completions.no_flush_in_flight(),
            |_| (),
        );
        let counts = self.work_requests();
        let lane = Lane {
            connections: std::mem::take(&mut self.connections),
            cq: Arc::clone(&self.cq),
            thread: self.thread,
            staging: self.staging.take().expect("given back once"),
        };
        self.host.count_work_requests(counts);
        self.host.release(lane, self.ops);
    }
}
