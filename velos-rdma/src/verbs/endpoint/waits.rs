//! The operations of a [`VerbsEndpoint`] that wait for completions (`Test`, `WaitAny`,
//! `Wait`, `Poll`, `GlobalFence`), and the flushes that make sure the completions they
//! wait for will be reported (see [`crate::verbs::signaling`]).

use super::{VerbsEndpoint, node_of};
use crate::error::RdmaError;
use crate::ids::{NodeId, WorkId};
use crate::verbs::completions::{Completions, Ticket};

impl VerbsEndpoint<'_> {
    /// Makes sure that a signaled work request follows every request up to position
    /// `upto` on the queue pair towards node index `t` that is on the NIC and not
    /// complete, so that their completion will be reported: if none does, posts a flush
    /// (see [`crate::verbs::signaling`]).
    ///
    /// At most one flush per queue pair is on the NIC. If another is needed while one is,
    /// `block` waits for the first to complete; without `block` this returns, and a later
    /// call posts it. Nothing is posted on a broken queue pair: the NIC completes its
    /// requests with errors, or the completion timeout does. A flush the NIC refuses
    /// breaks the queue pair (as a refused request does).
    pub(super) fn cover(&mut self, t: usize, upto: u64, block: bool) {
        let node = node_of(t);
        loop {
            let completed = self.completions.completed(node);
            let Some(remote) = self.signaling.flush_target(t, upto, completed) else {
                return;
            };
            if self.connections[t].broken() {
                return;
            }
            if self.completions.flush_in_flight(node) {
                if !block {
                    return;
                }
                self.settle(|c| !c.flush_in_flight(node), |_| ());
                continue;
            }
            let after = self.signaling.flush_position(t);
            let wr_id = Ticket::flush_wr_id(node, after);
            if self.connections[t].post_flush(wr_id, remote).is_ok() {
                self.doorbells.count(1);
                self.signaling.flushed(t);
                self.completions.flushing(node, after);
                assert!(self.signaling.flush_target(t, upto, completed).is_none());
            }
            return;
        }
    }

    /// [`cover`](VerbsEndpoint::cover) on every queue pair, up to `positions[t]` on the
    /// one towards node index `t`.
    fn cover_all(&mut self, positions: &[u64], block: bool) {
        for (t, &upto) in positions.iter().enumerate() {
            if upto > 0 {
                self.cover(t, upto, block);
            }
        }
    }

    /// `Test`: whether every earlier operation with `work_id` has completed (then as
    /// `wait`), without blocking.
    pub(super) fn test(&mut self, work_id: WorkId) -> Result<bool, RdmaError> {
        let Some(newest) = self.newest.get(&work_id).cloned() else {
            return Ok(true);
        };
        self.cover_all(&newest, false);
        self.poll_cq();
        if !self.completions.covers(&newest) {
            return Ok(false);
        }
        self.wait(work_id).map(|()| true)
    }

    /// `WaitAny`: the lowest i in `mask` whose work id `base + i` is complete (then as `wait`).
    pub(super) fn wait_any(&mut self, base: WorkId, mask: u64) -> Result<u64, RdmaError> {
        if mask == 0 {
            return Err(RdmaError::NothingToWaitFor);
        }
        let ids: Vec<(u64, Vec<u64>)> = (0..64u64)
            .filter(|i| mask & (1 << i) != 0)
            .map(|i| {
                let id = WorkId(base.0 + i as u32);
                (i, self.newest.get(&id).cloned().unwrap_or_default())
            })
            .collect();
        for (_, positions) in &ids {
            self.cover_all(positions, true);
        }
        let complete = |c: &Completions| {
            ids.iter()
                .find(|(_, n)| n.is_empty() || c.covers(n))
                .map(|(i, _)| *i)
        };
        let i = self.settle(|c| complete(c).is_some(), |c| complete(c).expect("settled"));
        assert!(mask & (1 << i) != 0);
        self.wait(WorkId(base.0 + i as u32)).map(|()| i)
    }

    /// `Wait`: every earlier operation with `work_id` has completed.
    pub(super) fn wait(&mut self, work_id: WorkId) -> Result<(), RdmaError> {
        let Some(newest) = self.newest.remove(&work_id) else {
            return Ok(());
        };
        self.cover_all(&newest, true);
        match self.settle(
            |completions| completions.covers(&newest),
            |completions| completions.take_failure(|ticket| ticket.work_id == work_id),
        ) {
            None => Ok(()),
            Some(cause) => Err(RdmaError::WorkFailed {
                work_id,
                cause: Box::new(cause),
            }),
        }
    }

    /// `Poll`: the oldest unacknowledged operation on the queue pair towards `node` has
    /// completed.
    pub(super) fn poll(&mut self, node: NodeId) -> Result<(), RdmaError> {
        let target = self.queue_pair(node)?;
        // In the model such a poll is never enabled and the thread blocks forever; a real
        // backend says so instead of hanging.
        if self.polled[target] >= self.posted[target] {
            return Err(RdmaError::NothingToPoll { node });
        }
        self.polled[target] += 1;
        let qp_seq = self.polled[target];
        self.cover(target, qp_seq, true);
        self.settle(
            |completions| completions.completed(node) >= qp_seq,
            |completions| {
                completions.take_failure(|ticket| ticket.target == node && ticket.qp_seq == qp_seq)
            },
        )
        .map_or(Ok(()), Err)
    }

    /// `GlobalFence`: every earlier operation towards `node` has completed.
    ///
    /// An RC completion of a WRITE means the responder acknowledged it; soft-RoCE places
    /// the data before acknowledging. On hardware where the acknowledgement may precede
    /// placement, a READ after the writes would make this stronger.
    pub(super) fn global_fence(&mut self, node: NodeId) -> Result<(), RdmaError> {
        let target = self.queue_pair(node)?;
        let posted = self.posted[target];
        self.cover(target, posted, true);
        self.settle(
            |completions| completions.completed(node) >= posted,
            |completions| completions.take_failure(|ticket| ticket.target == node),
        )
        .map_or(Ok(()), Err)?;
        if self.connections[target].broken() {
            return Err(RdmaError::QueuePairError { node });
        }
        Ok(())
    }
}
