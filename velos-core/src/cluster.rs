//! Where everything lives in the registered memory of a Velos cluster.

use crate::proposal::ProposerId;
use std::ops::Range;
use velos_rdma::plan::{Access, Grant};
use velos_rdma::{Layout, Loc, NodeId};

/// The shape of a cluster's registered memory. Every node is an acceptor and may propose;
/// node i is proposer i. Per node, in order: the acceptor words of every slot in every
/// epoch (epoch-major; see [`crate::freeze`]); every proposer's value buffer for every slot
/// (a begin stamp, `value_words` words, an end stamp); the heartbeat counter; scratch words
/// for the node's own operations; the snapshot region (a header naming the newest of two
/// banks, each a begin stamp, the snapshot point, its length in bytes, `snapshot_words`
/// words of content and an end stamp; see `crate::log::snapshot`); the durable point (how
/// far the node's disk holds the log, stored by its CPU, read by its peers on request)
/// and a landing word per node for the node's reads of its peers' durable points.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ClusterShape {
    /// Nodes (acceptors and proposers).
    pub nodes: u16,
    /// Slots of the log (positions of the ring).
    pub slots: u32,
    /// Acceptor words per slot: one per epoch of the overflow fallback (at least 1).
    pub epochs: u32,
    /// Content words of a value buffer (between its two stamps).
    pub value_words: u32,
    /// Scratch words per node.
    pub scratch_words: u32,
    /// Content words of a snapshot bank (0: snapshots carry no bytes).
    pub snapshot_words: u32,
}

impl ClusterShape {
    /// The acceptor word of `slot` at `acceptor` (epoch 0).
    pub fn acceptor_word(&self, acceptor: u16, slot: u32) -> Loc {
        self.epoch_word(acceptor, slot, 0)
    }

    /// The acceptor word of `slot` in `epoch` at `acceptor`.
    pub fn epoch_word(&self, acceptor: u16, slot: u32, epoch: u32) -> Loc {
        assert!(
            acceptor < self.nodes && slot < self.slots && epoch < self.epochs,
            "slot {slot} in epoch {epoch} at acceptor {acceptor}"
        );
        Loc::word(NodeId(acceptor), epoch * self.slots + slot)
    }

    fn buffer_words(&self) -> u32 {
        2 + self.value_words
    }

    fn buffer_base(&self, proposer: ProposerId, slot: u32) -> u32 {
        assert!(
            proposer.0 < self.nodes && slot < self.slots,
            "buffer of {proposer:?} for slot {slot}"
        );
        self.epochs * self.slots + (u32::from(proposer.0) * self.slots + slot) * self.buffer_words()
    }

    /// The begin stamp of `proposer`'s value buffer for `slot` at `acceptor`: the epoch
    /// and proposal number the buffer's content was written for (`crate::log::value`).
    pub fn value_stamp(&self, acceptor: u16, proposer: ProposerId, slot: u32) -> Loc {
        Loc::word(NodeId(acceptor), self.buffer_base(proposer, slot))
    }

    /// The end stamp of `proposer`'s value buffer for `slot` at `acceptor`, written after
    /// the content.
    pub fn value_end_stamp(&self, acceptor: u16, proposer: ProposerId, slot: u32) -> Loc {
        Loc::word(
            NodeId(acceptor),
            self.buffer_base(proposer, slot) + 1 + self.value_words,
        )
    }

    /// Word `i` of `proposer`'s value buffer for `slot` at `acceptor`.
    pub fn value_word(&self, acceptor: u16, proposer: ProposerId, slot: u32, i: u32) -> Loc {
        assert!(
            i < self.value_words,
            "value word {i} of {}",
            self.value_words
        );
        Loc::word(NodeId(acceptor), self.buffer_base(proposer, slot) + 1 + i)
    }

    fn heartbeat_index(&self) -> u32 {
        self.epochs * self.slots + u32::from(self.nodes) * self.slots * self.buffer_words()
    }

    /// `node`'s heartbeat counter.
    pub fn heartbeat(&self, node: u16) -> Loc {
        Loc::word(NodeId(node), self.heartbeat_index())
    }

    /// Scratch word `i` of `node`.
    pub fn scratch(&self, node: u16, i: u32) -> Loc {
        assert!(
            i < self.scratch_words,
            "scratch word {i} of {}",
            self.scratch_words
        );
        Loc::word(NodeId(node), self.heartbeat_index() + 1 + i)
    }

    fn snapshot_base(&self) -> u32 {
        self.heartbeat_index() + 1 + self.scratch_words
    }

    /// Words of one snapshot bank: begin stamp, point, length, content, end stamp.
    pub fn snapshot_bank_words(&self) -> u32 {
        self.snapshot_words + 4
    }

    /// The header of `node`'s snapshot region: which bank holds the newest snapshot.
    pub fn snapshot_header(&self, node: u16) -> Loc {
        Loc::word(NodeId(node), self.snapshot_base())
    }

    /// Word `i` of `node`'s snapshot bank `bank` (0: begin stamp, 1: point, 2: length,
    /// then the content, last the end stamp).
    pub fn snapshot_word(&self, node: u16, bank: u32, i: u32) -> Loc {
        assert!(
            bank < 2 && i < self.snapshot_bank_words(),
            "word {i} of snapshot bank {bank}"
        );
        Loc::word(
            NodeId(node),
            self.snapshot_base() + 1 + bank * self.snapshot_bank_words() + i,
        )
    }

    /// The word indices of a node's snapshot region (the same on every node).
    pub fn snapshot_region(&self) -> Range<u32> {
        let start = self.snapshot_base();
        start..start + 1 + 2 * self.snapshot_bank_words()
    }

    fn durable_base(&self) -> u32 {
        self.snapshot_region().end
    }

    /// `node`'s durable point: how far its disk holds the log (0 with durability off).
    /// Its owner stores it; every peer may read it. The embedding gives its meaning
    /// (velos's `embed`); the engine never touches it.
    pub fn durable_point(&self, node: u16) -> Loc {
        assert!(node < self.nodes, "node {node} of {}", self.nodes);
        Loc::word(NodeId(node), self.durable_base())
    }

    /// Where `node`'s read of `peer`'s durable point lands (a local word of `node`).
    pub fn durable_landing(&self, node: u16, peer: u16) -> Loc {
        assert!(
            node < self.nodes && peer < self.nodes,
            "landing of {peer} at {node} of {}",
            self.nodes
        );
        Loc::word(NodeId(node), self.durable_base() + 1 + u32::from(peer))
    }

    /// The word indices of a node's acceptor words, every slot in every epoch (the same
    /// on every node).
    pub fn acceptor_words(&self) -> Range<u32> {
        0..self.epochs * self.slots
    }

    /// The word indices of a node's value buffers, every proposer's for every slot (the
    /// same on every node). They follow the acceptor words directly.
    pub fn value_buffer_words(&self) -> Range<u32> {
        let start = self.buffer_base(ProposerId(0), 0);
        let words = start..self.heartbeat_index();
        assert_eq!(
            words.len() as u64,
            u64::from(self.nodes) * u64::from(self.slots) * u64::from(self.buffer_words()),
            "one buffer per proposer and slot"
        );
        words
    }

    /// The registered memory of every node.
    pub fn layout(&self) -> Layout {
        Layout::uniform(self.nodes, self.durable_base() + 1 + u32::from(self.nodes))
    }

    /// The least remote access `node`'s memory needs (its region plan, see
    /// [`velos_rdma::plan`]):
    ///
    /// * acceptor words: remote atomics (the only way anyone changes them) and reads (the
    ///   learners' catch-ups), for every node, never a plain write;
    /// * proposer p's value buffers: written and read by p only, read by every other node
    ///   (learners and a new leader's adoption read them), so that no proposer can write
    ///   into another's buffer;
    /// * the heartbeat counter: read by every node (the owner bumps it with a CPU store);
    /// * scratch words: nothing (they are the local operands of the node's own requests);
    /// * the snapshot region: read by every node (the owner writes it with CPU stores; a
    ///   replica that fell off the ring copies it);
    /// * the durable point: read by every node (the owner stores it); the landing words:
    ///   nothing (local destinations of the owner's reads).
    pub fn region_plan(&self, node: u16) -> Vec<Grant> {
        assert!(node < self.nodes, "node {node} of {}", self.nodes);
        let acceptor_words = 0..self.epochs * self.slots;
        let mut plan = vec![Grant::new(acceptor_words, Access::ReadAtomic)];
        for p in 0..self.nodes {
            let start = self.buffer_base(ProposerId(p), 0);
            let buffers = start..start + self.slots * self.buffer_words();
            plan.push(Grant::new(buffers.clone(), Access::ReadWrite).only(NodeId(p)));
            for reader in (0..self.nodes).filter(|&q| q != p) {
                plan.push(Grant::new(buffers.clone(), Access::Read).only(NodeId(reader)));
            }
        }
        let beat = self.heartbeat_index();
        plan.push(Grant::new(beat..beat + 1, Access::Read));
        plan.push(Grant::new(self.snapshot_region(), Access::Read));
        let durable = self.durable_base();
        plan.push(Grant::new(durable..durable + 1, Access::Read));
        debug_assert_eq!(
            velos_rdma::plan::check_plan(&self.layout(), NodeId(node), &plan),
            Ok(())
        );
        plan
    }

    /// Every node's region plan, by node.
    pub fn region_plans(&self) -> Vec<Vec<Grant>> {
        (0..self.nodes).map(|n| self.region_plan(n)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use velos_rdma::plan::{RemoteKind, check_plan, permits};

    /// What node `peer` may do to `loc` under its node's plan: (read, write, atomic).
    fn may(shape: &ClusterShape, peer: u16, loc: Loc) -> (bool, bool, bool) {
        let plan = shape.region_plan(loc.node.0);
        let word = loc.offset / 8;
        let p = |kind| permits(&plan, NodeId(peer), word, kind);
        (
            p(RemoteKind::Read),
            p(RemoteKind::Write),
            p(RemoteKind::Atomic),
        )
    }

    #[test]
    fn the_region_plan_grants_each_word_the_least_access_it_needs() {
        let shape = ClusterShape {
            nodes: 3,
            slots: 4,
            epochs: 2,
            value_words: 2,
            scratch_words: 5,
            snapshot_words: 3,
        };
        for node in 0..3 {
            let plan = shape.region_plan(node);
            assert_eq!(check_plan(&shape.layout(), NodeId(node), &plan), Ok(()));
            // The device-memory ranges: acceptor words, then the value buffers.
            assert_eq!(shape.acceptor_words().end, shape.value_buffer_words().start);
            let last = shape.value_end_stamp(node, ProposerId(2), 3);
            assert_eq!(last.offset / 8 + 1, shape.value_buffer_words().end);
            for peer in 0..3 {
                for slot in 0..4 {
                    for epoch in 0..2 {
                        let word = shape.epoch_word(node, slot, epoch);
                        assert_eq!(may(&shape, peer, word), (true, false, true), "{word}");
                    }
                    for p in 0..3 {
                        let own = p == peer;
                        let proposer = ProposerId(p);
                        let words = [
                            shape.value_stamp(node, proposer, slot),
                            shape.value_word(node, proposer, slot, 0),
                            shape.value_word(node, proposer, slot, 1),
                            shape.value_end_stamp(node, proposer, slot),
                        ];
                        for loc in words {
                            assert_eq!(may(&shape, peer, loc), (true, own, false), "{loc}");
                        }
                    }
                }
                let beat = shape.heartbeat(node);
                assert_eq!(may(&shape, peer, beat), (true, false, false));
                for i in 0..5 {
                    let scratch = shape.scratch(node, i);
                    assert_eq!(may(&shape, peer, scratch), (false, false, false));
                }
                let header = shape.snapshot_header(node);
                assert_eq!(may(&shape, peer, header), (true, false, false));
                for bank in 0..2 {
                    for i in 0..shape.snapshot_bank_words() {
                        let loc = shape.snapshot_word(node, bank, i);
                        assert_eq!(may(&shape, peer, loc), (true, false, false), "{loc}");
                    }
                }
                let end = shape.snapshot_word(node, 1, shape.snapshot_bank_words() - 1);
                let point = shape.durable_point(node);
                assert_eq!(end.offset / 8 + 1, point.offset / 8, "the point follows");
                assert_eq!(may(&shape, peer, point), (true, false, false));
                for p in 0..3 {
                    let landing = shape.durable_landing(node, p);
                    assert_eq!(may(&shape, peer, landing), (false, false, false));
                }
                let last = shape.durable_landing(node, 2);
                let words = shape.layout().words(NodeId(node));
                assert_eq!(last.offset / 8 + 1, words, "the landing words end the node");
            }
        }
    }
}
