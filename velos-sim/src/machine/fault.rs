//! Faults the simulator injects: they reach programs through the normal error type.

use super::items::{PipeItem, RemoteWrite, SbEntry, Timed};
use super::state::{CrashMode, Machine, Next, NodeStatus, QpStatus};
use velos_rdma::{NodeId, Process, RdmaError};

impl<P: Process> Machine<P> {
    /// Crashes `node`: its memory is gone, its threads stop, its NIC drops what it had
    /// not sent. Operations towards it never complete (`Hang`) or fail (`Error`).
    pub fn crash(&mut self, node: NodeId, mode: CrashMode) {
        assert!(node.index() < self.node_count(), "crash of an unknown node");
        if !self.is_up(node) {
            return;
        }
        self.nodes[node.index()] = NodeStatus::Crashed(mode);
        self.mem[node.index()].iter_mut().for_each(|w| *w = 0);
        for t in 0..self.threads.len() {
            if self.threads[t].node == node {
                self.stop_thread(t);
            } else if mode == CrashMode::Error {
                let q = self.qp_index(t, node);
                self.fail_queue_pair(q, RdmaError::RemoteCrashed { node });
                self.qps[q].rw.clear(); // the memory they were bound for is gone
            }
        }
        self.refresh_all_active();
        assert!(!self.is_up(node), "crash: the node is down");
    }

    /// Starts `process` on crashed `node` at virtual time `now`, in the place of its thread
    /// (a fresh process that registers blank memory at the same addresses: a replacement):
    /// the node is up again, its memory all zero, every peer may write into it; the
    /// operations still queued towards it from before fail with
    /// [`RdmaError::RemoteCrashed`] (their connection ended with the old process) and its
    /// remote writes in flight are dropped (their memory is gone). The new process's own
    /// queue pairs carry its operations (it connects them as it joins), those an
    /// `Op::Disconnect` cut included; the other nodes' queue pairs towards it are
    /// [`QpStatus::Unmet`] until each meets it ([`Machine::reconnect`]); a fault's error
    /// state stays.
    pub fn restart(&mut self, node: NodeId, mut process: P, now: u64) {
        assert!(
            node.index() < self.node_count(),
            "restart of an unknown node"
        );
        assert!(
            !self.is_up(node),
            "restart: only a crashed node starts again"
        );
        let t = self
            .threads
            .iter()
            .position(|t| t.node == node)
            .expect("restart: a node with a thread");
        assert!(
            self.threads.iter().filter(|t| t.node == node).count() == 1,
            "restart: one thread per restarted node"
        );
        for other in 0..self.threads.len() {
            // The new process connects its own queue pairs as it joins, the ones its
            // predecessor had cut (`Op::Disconnect`) included; a fault's error state stays.
            let back = self.qp_index(t, self.threads[other].node);
            if matches!(
                self.qps[back].status,
                QpStatus::Disconnected | QpStatus::Unmet
            ) {
                self.qps[back].status = QpStatus::Ready;
            }
            let q = self.qp_index(other, node);
            if other != t && self.qps[q].status != QpStatus::Error {
                self.qps[q].status = QpStatus::Unmet;
            }
            if other != t {
                self.fail_queue_pair(q, RdmaError::RemoteCrashed { node });
                self.fail_posted_towards(other, node);
            }
            // Writes on their way into the old memory, the old process's own atomics
            // towards itself included (they held L[node]): gone with it.
            self.qps[q].rw.clear();
        }
        self.nodes[node.index()] = NodeStatus::Up;
        self.mem[node.index()].iter_mut().for_each(|w| *w = 0);
        self.atomic_busy[node.index()] = false;
        self.writers[node.index()] = u64::MAX;
        let polls = process.polls();
        assert!(
            !process.changes_write_access() || self.access_control,
            "restart: a process that changes write access needs a machine explored without reduction"
        );
        let next = match process.resume(velos_rdma::Reply::Start) {
            velos_rdma::Step::Op(op) => Next::Pending(op),
            velos_rdma::Step::Done => Next::Finished,
        };
        let thread = &mut self.threads[t];
        thread.process = process;
        thread.next = next;
        thread.ready = now;
        thread.polls = polls;
        thread.changing_access = false;
        assert!(
            thread.sb.is_empty() && thread.failed.is_empty(),
            "a stopped thread"
        );
        self.refresh_all_active();
        assert!(self.is_up(node), "restart: the node is up");
    }

    /// Puts the queue pairs from threads on `from` towards `to` in the error state: what
    /// is in their pipes fails, and so does everything posted on them later.
    pub fn queue_pair_error(&mut self, from: NodeId, to: NodeId) {
        self.break_queue_pairs(from, to, QpStatus::Error);
    }

    /// `Op::Disconnect { node: peer }` by a thread of `node`: the queue pairs between the
    /// two, both ways, are [`QpStatus::Disconnected`] and what is in their pipes fails.
    ///
    /// Rule (disconnect the process met): the cut is of the process in `peer`'s place
    /// that `node` is connected to. If a new one started there that `node` has not met
    /// yet ([`QpStatus::Unmet`]), the old one is gone already and the new one's queue
    /// pairs towards `node` are its own: only `node`'s side is cut.
    pub(crate) fn disconnect(&mut self, node: NodeId, peer: NodeId) -> Result<(), RdmaError> {
        if peer == node || peer.index() >= self.node_count() {
            return Err(RdmaError::UnknownNode { node: peer });
        }
        let met = !self
            .queue_pairs(node, peer)
            .any(|q| self.qps[q].status == QpStatus::Unmet);
        self.break_queue_pairs(node, peer, QpStatus::Disconnected);
        if met {
            self.break_queue_pairs(peer, node, QpStatus::Disconnected);
        }
        assert!(
            self.queue_pairs(node, peer)
                .all(|q| self.qps[q].status != QpStatus::Ready),
            "rule (disconnect the process met): my side is cut"
        );
        Ok(())
    }

    /// The join path met the process now in `to`'s place from `from`: the queue pairs of
    /// `from`'s threads towards it that were [`QpStatus::Unmet`] or
    /// [`QpStatus::Disconnected`] carry operations again (a fault's error state stays).
    pub fn reconnect(&mut self, from: NodeId, to: NodeId) {
        assert!(
            from.index() < self.node_count() && to.index() < self.node_count() && from != to,
            "reconnect: two nodes of the machine"
        );
        for q in self.queue_pairs(from, to).collect::<Vec<_>>() {
            if matches!(self.qps[q].status, QpStatus::Unmet | QpStatus::Disconnected) {
                self.qps[q].status = QpStatus::Ready;
            }
        }
        self.refresh_all_active();
        assert!(
            self.queue_pairs(from, to)
                .all(|q| self.qps[q].status != QpStatus::Unmet),
            "reconnect: met"
        );
    }

    /// The queue pairs of `from`'s threads towards `to`.
    fn queue_pairs(&self, from: NodeId, to: NodeId) -> impl Iterator<Item = usize> + '_ {
        (0..self.threads.len())
            .filter(move |&t| self.threads[t].node == from)
            .map(move |t| self.qp_index(t, to))
    }

    /// Puts the queue pairs from threads on `from` towards `to` in `status`: what is in
    /// their pipes fails, and so does everything posted on them later.
    fn break_queue_pairs(&mut self, from: NodeId, to: NodeId, status: QpStatus) {
        assert_ne!(status, QpStatus::Ready, "a broken queue pair");
        for q in self.queue_pairs(from, to).collect::<Vec<_>>() {
            self.qps[q].status = status;
            self.fail_queue_pair(q, RdmaError::QueuePairError { node: to });
        }
        self.refresh_all_active();
    }

    fn stop_thread(&mut self, t: usize) {
        let thread = &mut self.threads[t];
        thread.next = Next::Crashed;
        thread.sb.clear();
        thread.failed.clear();
        for n in 0..self.node_count() {
            let q = self.qp_index(t, NodeId(n as u16));
            // An atomic that already took L[n] runs to its end at the responder: its write
            // is issued, so the target's atomic lock is released as usual.
            let pipe = std::mem::take(&mut self.qps[q].pipe);
            for entry in pipe {
                if let PipeItem::AtomicWrite { remote, value, .. } = entry.item {
                    self.qps[q].rw.push_back(Timed {
                        item: RemoteWrite::Atomic { loc: remote, value },
                        ready: entry.ready,
                    });
                }
            }
            self.qps[q].lw.clear();
        }
    }

    /// Fails thread `t`'s remote operations towards `node` that wait in its store buffer:
    /// they were posted on the connection to the process `node` just replaced, so they
    /// never reach the new one (a CAS accepting a value whose put went to the old memory
    /// left the new acceptor's word naming a buffer never written, and a follower reading
    /// it for ever: seed 143896).
    fn fail_posted_towards(&mut self, t: usize, node: NodeId) {
        for entry in std::mem::take(&mut self.threads[t].sb) {
            match &entry.item {
                SbEntry::Remote { target, item } if *target == node => {
                    self.fail_item(t, item, RdmaError::RemoteCrashed { node });
                }
                _ => self.threads[t].sb.push_back(entry),
            }
        }
        assert!(
            !self.threads[t]
                .sb
                .iter()
                .any(|e| matches!(&e.item, SbEntry::Remote { target, .. } if *target == node)),
            "restart: nothing posted to the old process is left to reach the new one"
        );
    }

    pub(crate) fn fail_queue_pair(&mut self, q: usize, error: RdmaError) {
        let (t, target) = self.qp_ends(q);
        let pipe = std::mem::take(&mut self.qps[q].pipe);
        for entry in pipe {
            if let PipeItem::AtomicWrite { .. } = entry.item {
                // The atomic already executed at a live responder and holds L[n]: it
                // completes there, but the requester sees the failure.
                if self.is_up(target) {
                    self.atomic_busy[target.index()] = false;
                }
            }
            self.fail_item(t, &entry.item, error.clone());
        }
    }

    /// Whether any thread still has work (a pending operation).
    pub fn live_threads(&self) -> usize {
        self.threads
            .iter()
            .filter(|t| matches!(t.next, Next::Pending(_)))
            .count()
    }
}
