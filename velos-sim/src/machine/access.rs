//! Queue-pair write permission (`Op::SetWriteAccess`, Mu's permission switch): which nodes
//! may put into a node's memory, the change of it, and the refusal of a put.
//!
//! The change is one operation of the target's CPU in two steps: the first checks it and
//! starts it (the thread is busy for the latency model's `qp_access_change_ns`), the
//! second puts it in effect and resumes the process. A put is checked when its write
//! reaches the target (rule 3): a refused put fails with `RemoteAccess` and puts its queue
//! pair in the `Refused` error state — the rest of its pipe fails, later operations fail at
//! once — while the writes the target accepted before it still land. A later grant to the
//! requester's node reconnects the queue pair. Reads and remote atomics are never checked.
//!
//! The explorer's reductions do not model this (a permission change decides whether posted
//! puts run): a machine with a process that declares `changes_write_access` is explored
//! without reduction, and an undeclared change is refused with `Unsupported`.

use super::delay::{Clock, Delay};
use super::state::{Machine, QpStatus};
use velos_rdma::{Loc, NodeId, Process, RdmaError, Reply, WorkId, check_writers, may_write};

impl<P: Process> Machine<P> {
    /// Thread t's `SetWriteAccess { writers }` at `now`: `None` when the change started
    /// (the thread's next CPU step, after the change's cost, puts it in effect), else the
    /// reply: the change is in effect, or the operation failed.
    pub(crate) fn set_write_access(
        &mut self,
        t: usize,
        writers: u64,
        now: u64,
        clock: &mut dyn Clock,
    ) -> Option<Reply> {
        if !self.threads[t].changing_access {
            if let Err(e) = self.check_access_change(writers) {
                return Some(Reply::Failed(e));
            }
            self.threads[t].changing_access = true;
            self.threads[t].ready = now + clock.delay(Delay::QpAccessChange, None);
            return None;
        }
        self.threads[t].changing_access = false;
        let node = self.threads[t].node;
        self.writers[node.index()] = writers;
        // A grant reconnects the refused queue pairs of the granted nodes towards this one.
        for u in 0..self.threads.len() {
            let q = self.qp_index(u, node);
            if may_write(writers, self.threads[u].node) && self.qps[q].status == QpStatus::Refused {
                assert!(
                    self.qps[q].pipe.is_empty(),
                    "access: a refused queue pair carries nothing new"
                );
                self.qps[q].status = QpStatus::Ready;
            }
        }
        assert_eq!(
            self.writers[node.index()],
            writers,
            "access: the change is in effect"
        );
        Some(Reply::Done)
    }

    fn check_access_change(&self, writers: u64) -> Result<(), RdmaError> {
        if !self.access_control {
            return Err(RdmaError::Unsupported {
                operation: "SetWriteAccess",
                backend: "the emulator, for a process that does not declare \
                          changes_write_access",
            });
        }
        check_writers(writers, self.node_count())
    }

    /// Whether the target of queue pair q lets the queue pair's node put into its memory.
    pub(crate) fn may_put(&self, q: usize, target: NodeId) -> bool {
        let (t, _) = self.qp_ends(q);
        may_write(self.writers[target.index()], self.threads[t].node)
    }

    /// Rule 3 refused: the put (pipe item i of queue pair q, a `P1`) fails with
    /// `RemoteAccess`, and the queue pair goes into the `Refused` error state, failing the
    /// rest of its pipe. Its `rW` (writes accepted earlier) still commits.
    pub(crate) fn refuse_put(&mut self, q: usize, i: usize, remote: Loc, work_id: WorkId) {
        let (t, target) = self.qp_ends(q);
        assert!(
            !self.may_put(q, target),
            "refusal: the target denies the put"
        );
        self.qps[q].pipe.remove(i).expect("refusal: the put exists");
        self.record_failure(t, work_id, RdmaError::RemoteAccess { loc: remote });
        self.qps[q].status = QpStatus::Refused;
        self.fail_queue_pair(q, RdmaError::QueuePairError { node: target });
        assert!(
            self.qps[q].pipe.is_empty(),
            "refusal: the queue pair's pipe failed"
        );
    }
}
