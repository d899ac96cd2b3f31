//! Where everything lives in the registered memory of a Velos cluster.

use crate::proposal::ProposerId;
use velos_rdma::{Layout, Loc, NodeId};

/// The shape of a cluster's registered memory. Every node is an acceptor and may propose;
/// node i is proposer i. Per node, in order: the acceptor words of every slot in every
/// epoch (epoch-major; see [`crate::freeze`]); every proposer's value buffer for every slot
/// (a begin stamp, `value_words` words, an end stamp); the heartbeat counter; scratch words
/// for the node's own operations.
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

    /// The registered memory of every node.
    pub fn layout(&self) -> Layout {
        Layout::uniform(self.nodes, self.heartbeat_index() + 1 + self.scratch_words)
    }
}
