//! Where everything lives in the registered memory of a Velos cluster.

use crate::proposal::ProposerId;
use velos_rdma::{Layout, Loc, NodeId};

/// The shape of a cluster's registered memory. Every node is an acceptor and may propose;
/// node i is proposer i. Per node, in order: the acceptor words of every slot; every
/// proposer's value buffer for every slot (a stamp word, then `value_words` words); the
/// heartbeat counter; scratch words for the node's own operations.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ClusterShape {
    /// Nodes (acceptors and proposers).
    pub nodes: u16,
    /// Slots of the log (positions of the ring).
    pub slots: u32,
    /// Words of a value buffer after its stamp.
    pub value_words: u32,
    /// Scratch words per node.
    pub scratch_words: u32,
}

impl ClusterShape {
    /// The acceptor word of `slot` at `acceptor`.
    pub fn acceptor_word(&self, acceptor: u16, slot: u32) -> Loc {
        assert!(
            acceptor < self.nodes && slot < self.slots,
            "slot {slot} at acceptor {acceptor}"
        );
        Loc::word(NodeId(acceptor), slot)
    }

    fn buffer_base(&self, proposer: ProposerId, slot: u32) -> u32 {
        assert!(
            proposer.0 < self.nodes && slot < self.slots,
            "buffer of {proposer:?} for slot {slot}"
        );
        self.slots + (u32::from(proposer.0) * self.slots + slot) * (1 + self.value_words)
    }

    /// The stamp word of `proposer`'s value buffer for `slot` at `acceptor`: the proposal
    /// number the buffer's content was written for.
    pub fn value_stamp(&self, acceptor: u16, proposer: ProposerId, slot: u32) -> Loc {
        Loc::word(NodeId(acceptor), self.buffer_base(proposer, slot))
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
        self.slots + u32::from(self.nodes) * self.slots * (1 + self.value_words)
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

    /// The registered memory of every node.
    pub fn layout(&self) -> Layout {
        Layout::uniform(self.nodes, self.heartbeat_index() + 1 + self.scratch_words)
    }
}
