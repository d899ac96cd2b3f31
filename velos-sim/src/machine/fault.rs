//! Faults the simulator injects: they reach programs through the normal error type.

use super::items::{PipeItem, RemoteWrite, Timed};
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

    /// Puts the queue pairs from threads on `from` towards `to` in the error state: what
    /// is in their pipes fails, and so does everything posted on them later.
    pub fn queue_pair_error(&mut self, from: NodeId, to: NodeId) {
        for t in 0..self.threads.len() {
            if self.threads[t].node == from {
                let q = self.qp_index(t, to);
                self.qps[q].status = QpStatus::Error;
                self.fail_queue_pair(q, RdmaError::QueuePairError { node: to });
            }
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
