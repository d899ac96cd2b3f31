//! The registered memory of a cluster: how many words each node registers.

use crate::error::RdmaError;
use crate::ids::{Loc, NodeId};
use serde::{Deserialize, Serialize};

/// Sizes of the registered regions, one per node, in 8-byte words.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Layout {
    words: Vec<u32>,
}

impl Layout {
    /// `nodes` nodes with `words` words each.
    pub fn uniform(nodes: u16, words: u32) -> Layout {
        assert!(nodes > 0, "a layout has at least one node");
        Layout {
            words: vec![words; usize::from(nodes)],
        }
    }

    /// One region size per node.
    pub fn from_words(words: Vec<u32>) -> Layout {
        assert!(!words.is_empty(), "a layout has at least one node");
        assert!(words.len() <= usize::from(u16::MAX), "too many nodes");
        Layout { words }
    }

    /// Number of nodes.
    pub fn nodes(&self) -> u16 {
        self.words.len() as u16
    }

    /// Whether `node` is a node of this layout.
    pub fn has_node(&self, node: NodeId) -> bool {
        node.index() < usize::from(self.nodes())
    }

    /// Every node id.
    pub fn node_ids(&self) -> impl Iterator<Item = NodeId> + '_ {
        (0..self.nodes()).map(NodeId)
    }

    /// Words registered on `node` (0 for an unknown node).
    pub fn words(&self, node: NodeId) -> u32 {
        self.words.get(node.index()).copied().unwrap_or(0)
    }

    /// Checks that `loc` names an aligned word inside its node's region and returns its
    /// word index.
    pub fn check(&self, loc: Loc) -> Result<usize, RdmaError> {
        // Not `ok_or(error)`: that builds and drops an error on every call, the hot path's
        // most frequent check.
        let Some(index) = loc.word_index() else {
            return Err(RdmaError::MisalignedAtomic { loc });
        };
        if index >= self.words(loc.node) as usize {
            return Err(RdmaError::OutOfBounds { loc });
        }
        Ok(index)
    }
}
