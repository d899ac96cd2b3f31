//! Rule (retire): least privilege after a membership change. A member removed by a
//! configuration change (at the incarnation a replica is connected to: not a replacement,
//! whose old process the join path has cut off already) is cut off by every replica once
//! that replica runs no slot naming it. The removed process keeps serving its memory
//! until then — its acceptor words still count in the slots before the change takes
//! effect, which a lagging peer may have to learn or a new leader to decide again (cutting
//! itself off as soon as it applied its removal stopped a log whose other old member was
//! paused: `velos-testkit/tests/membership.rs`) — and ends once every peer cut it off or
//! is suspected. It comes back only as a new process, through the join path (rule (no
//! amnesia) then names its new incarnation).

use super::{Replica, Then};
use crate::log::event::Event;
use crate::log::membership::Members;
use velos_rdma::{NodeId, Op};

impl Replica {
    /// Rule (retire), at each heartbeat. A peer that no configuration of my slots from my
    /// next one on names, at the incarnation I am connected to, and that was a member, is
    /// cut off (`Op::Disconnect`) once its heartbeat shows it applied as far as I did, or a
    /// failure timeout after I applied its removal — time for it to learn the removal too
    /// —, or once Ω suspects it. Me removed: once every peer cut me off or is suspected, I
    /// cut my side too and stop at the end of this turn.
    pub(super) fn retire_removed(&mut self) {
        let (me, next) = (self.me, self.next_apply);
        assert!(
            !self.beat.retired.contains(me),
            "rule (retire): a replica never cuts itself"
        );
        if self.api.removed {
            return;
        }
        let removed = self.membership.removed_from(next);
        if removed.is_empty() && self.beat.removed_since.iter().all(Option::is_none) {
            return; // the steady state: one pass over the configurations
        }
        if removed.contains(me) {
            let let_go = (0..self.config.replicas)
                .filter(|&p| p != me)
                .all(|p| self.omega.suspects(p));
            if !let_go {
                return; // my words may still count for a peer below the change
            }
            if self.is_leader() {
                self.step_down(); // a removed leader handed over already; never lead on
            }
            for peer in (0..self.config.replicas).filter(|&p| p != me) {
                self.disconnect(peer);
            }
            self.api.removed = true;
            self.event(|| Event::Removed { slot: next });
            assert!(
                !self.is_leader(),
                "rule (retire): a removed replica does not lead"
            );
            return;
        }
        for peer in (0..self.config.replicas).filter(|&p| p != me) {
            let p = usize::from(peer);
            if self.beat.retired.contains(peer) || !removed.contains(peer) {
                self.beat.removed_since[p] = None;
                continue;
            }
            let since = *self.beat.removed_since[p].get_or_insert(self.now);
            let cut = self.beat.reached[p] >= next
                || self.now >= since + self.config.failure_timeout_ns
                || self.omega.suspects(peer);
            if cut {
                self.disconnect(peer);
                let incarnation = self.membership.incarnation(peer);
                self.event(|| Event::Disconnected { peer, incarnation });
            }
        }
        assert!(
            self.beat
                .retired
                .iter()
                .all(|p| !self.membership.voters(next).contains(p)),
            "rule (retire): no voter of my next slot is cut off"
        );
    }

    /// Cuts `peer` off: the disconnect posted, and what I knew of it from its heartbeat
    /// forgotten (it is no source of snapshots or of catch-up any more).
    fn disconnect(&mut self, peer: u16) {
        if self.beat.retired.contains(peer) {
            return;
        }
        self.op(Op::Disconnect { node: NodeId(peer) }, Then::Ignore);
        self.beat.retired = Members(self.beat.retired.0 | 1 << peer);
        let p = usize::from(peer);
        self.beat.points[p] = 0;
        self.beat.reached[p] = 0;
        assert!(self.beat.retired.contains(peer));
    }

    /// The peers this replica cut off (rule (retire)).
    pub fn retired(&self) -> Members {
        self.beat.retired
    }

    /// Whether a configuration change removed this replica: it cut itself off and stopped
    /// (rule (retire)); only a new process in its place comes back.
    pub fn removed(&self) -> bool {
        self.api.removed
    }
}
