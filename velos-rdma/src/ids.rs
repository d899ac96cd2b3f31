//! Identifiers: nodes, threads, work ids and memory locations.

use serde::{Deserialize, Serialize};
use std::fmt;

/// A node of the fabric (a machine with one NIC). Numbered from 0 inside the crates;
/// the `.litmus` format numbers nodes from 1 and converts at its boundary.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct NodeId(pub u16);

impl NodeId {
    /// The node's index into per-node tables.
    pub fn index(self) -> usize {
        usize::from(self.0)
    }
}

impl fmt::Display for NodeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "node{}", self.0)
    }
}

/// A work id: the rdmawait tag of a remote operation. `wait(work_id)` waits for every
/// earlier operation of the same thread carrying it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct WorkId(pub u32);

/// A location: one 8-byte word of registered memory, named by its home node and its byte
/// offset in that node's registered region. Offsets are in bytes so that misalignment is
/// representable and checked, as on real hardware.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Loc {
    /// The node whose memory holds the word.
    pub node: NodeId,
    /// Byte offset in the node's registered region; a word access needs a multiple of 8.
    pub offset: u32,
}

impl Loc {
    /// The location of word number `word` (offset `8 * word`) on `node`.
    pub fn word(node: NodeId, word: u32) -> Loc {
        Loc {
            node,
            offset: word * 8,
        }
    }

    /// The location `i` words (8·i bytes) after this one, as a multi-word operation's word
    /// `i`: an offset past `u32::MAX` saturates, which no layout holds, so checking it fails.
    pub fn word_after(self, i: usize) -> Loc {
        let step = u32::try_from(8 * i as u64).unwrap_or(u32::MAX);
        Loc {
            offset: self.offset.saturating_add(step),
            ..self
        }
    }

    /// The word index, if the offset is 8-byte aligned.
    pub fn word_index(self) -> Option<usize> {
        (self.offset % 8 == 0).then_some((self.offset / 8) as usize)
    }
}

impl fmt::Display for Loc {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}+{:#x}", self.node, self.offset)
    }
}
