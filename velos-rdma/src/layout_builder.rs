//! Allocating registered words node by node while a program's objects are built.

use crate::ids::{Loc, NodeId};
use crate::layout::Layout;

/// Hands out words of registered memory, node by node, then builds the [`Layout`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LayoutBuilder {
    words: Vec<u32>,
}

impl LayoutBuilder {
    /// A builder for `nodes` nodes with nothing allocated.
    pub fn new(nodes: u16) -> LayoutBuilder {
        assert!(nodes > 0, "at least one node");
        LayoutBuilder {
            words: vec![0; usize::from(nodes)],
        }
    }

    /// Number of nodes.
    pub fn nodes(&self) -> u16 {
        self.words.len() as u16
    }

    /// A fresh word on `node`.
    pub fn alloc(&mut self, node: NodeId) -> Loc {
        let w = self
            .words
            .get_mut(node.index())
            .unwrap_or_else(|| panic!("allocation on {node}, which the builder does not have"));
        *w += 1;
        Loc::word(node, *w - 1)
    }

    /// `count` fresh consecutive words on `node`.
    pub fn alloc_many(&mut self, node: NodeId, count: u32) -> Vec<Loc> {
        (0..count).map(|_| self.alloc(node)).collect()
    }

    /// The layout of everything allocated so far.
    pub fn build(&self) -> Layout {
        Layout::from_words(self.words.clone())
    }
}
