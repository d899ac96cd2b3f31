//! The registered memory of every node, and the fault state of nodes and queue pairs.

use crate::error::RdmaError;
use crate::ids::{Loc, NodeId};
use crate::layout::Layout;
use crate::op::{check_writers, may_write};
use crate::plan::{Grant, RemoteKind, permits};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// Node memories as atomic words, plus which nodes crashed and which queue pairs are broken.
///
/// Every access is `SeqCst`: the backend relies on one total order of all memory accesses
/// (see the module documentation of [`crate::mem`]).
#[derive(Debug)]
pub(crate) struct Memory {
    layout: Layout,
    /// One region per node, `layout.words(node)` words long.
    words: Vec<Vec<AtomicU64>>,
    /// Per node: whether it crashed.
    crashed: Vec<AtomicBool>,
    /// Per (from, to) pair, row-major: whether queue pairs from `from` towards `to` are in
    /// the error state.
    queue_pair_error: Vec<AtomicBool>,
    /// Per node, its region plan, or `None`: every remote access allowed.
    plans: Option<Vec<Vec<Grant>>>,
    /// Per node: which nodes may put into its memory (`Op::SetWriteAccess`; bit i: node i).
    writers: Vec<AtomicU64>,
    /// Per (from, to) pair, row-major: whether queue pairs from `from` towards `to` are in
    /// error because `to` refused a put; a grant of write access to `from` clears it.
    refused: Vec<AtomicBool>,
    /// Per (from, to) pair, row-major: whether the process now in `to`'s place started
    /// after `from` last connected to it — `from` has not met it yet ([`Memory::reconnect`]).
    unmet: Vec<AtomicBool>,
}

impl Memory {
    /// Zeroed memory for `layout`, no faults.
    pub(crate) fn new(layout: Layout) -> Memory {
        let nodes = usize::from(layout.nodes());
        let words = layout
            .node_ids()
            .map(|node| (0..layout.words(node)).map(|_| AtomicU64::new(0)).collect())
            .collect();
        Memory {
            layout,
            words,
            crashed: (0..nodes).map(|_| AtomicBool::new(false)).collect(),
            queue_pair_error: (0..nodes * nodes).map(|_| AtomicBool::new(false)).collect(),
            plans: None,
            writers: (0..nodes).map(|_| AtomicU64::new(u64::MAX)).collect(),
            refused: (0..nodes * nodes).map(|_| AtomicBool::new(false)).collect(),
            unmet: (0..nodes * nodes).map(|_| AtomicBool::new(false)).collect(),
        }
    }

    /// Zeroed memory for `layout` whose remote accesses `plans` (one checked plan per
    /// node) restrict.
    pub(crate) fn with_plans(layout: Layout, plans: Vec<Vec<Grant>>) -> Memory {
        assert_eq!(
            plans.len(),
            usize::from(layout.nodes()),
            "one plan per node"
        );
        Memory {
            plans: Some(plans),
            ..Memory::new(layout)
        }
    }

    /// Whether the plan of `first`'s node lets `source` make an access of `kind` to each
    /// of the `count` words from `first` by one grant (always without plans); `false`
    /// says nothing: check them one by one ([`Memory::permit`]).
    pub(crate) fn permit_all(
        &self,
        source: NodeId,
        first: Loc,
        count: usize,
        kind: RemoteKind,
    ) -> bool {
        let Some(plans) = &self.plans else {
            return true;
        };
        let Ok(count) = u32::try_from(count) else {
            return false;
        };
        crate::plan::permits_all(
            &plans[first.node.index()],
            source,
            first.offset / 8,
            count,
            kind,
        )
    }

    /// `Err(RemoteAccess)` unless the plan of `remote`'s node lets `source` make an access
    /// of `kind` there (always `Ok` without plans); `remote` is a checked location.
    pub(crate) fn permit(
        &self,
        source: NodeId,
        remote: Loc,
        kind: RemoteKind,
    ) -> Result<(), RdmaError> {
        let Some(plans) = &self.plans else {
            return Ok(());
        };
        let word = remote.offset / 8;
        if permits(&plans[remote.node.index()], source, word, kind) {
            Ok(())
        } else {
            Err(RdmaError::RemoteAccess { loc: remote })
        }
    }

    /// The layout this memory was built for.
    pub(crate) fn layout(&self) -> &Layout {
        &self.layout
    }

    /// Whether `node` is a node of the layout.
    pub(crate) fn has_node(&self, node: NodeId) -> bool {
        node.index() < self.words.len()
    }

    /// The word at `loc`, after checking alignment and bounds.
    pub(crate) fn word(&self, loc: Loc) -> Result<&AtomicU64, RdmaError> {
        let index = self.layout.check(loc)?;
        Ok(&self.words[loc.node.index()][index])
    }

    /// The word with index `index` on `node`, an index already checked against the layout
    /// (a `Task` checks its addresses at post).
    pub(crate) fn word_at(&self, node: NodeId, index: usize) -> &AtomicU64 {
        &self.words[node.index()][index]
    }

    /// `Err(RemoteCrashed)` if `node` crashed.
    pub(crate) fn alive(&self, node: NodeId) -> Result<(), RdmaError> {
        if self.crashed[node.index()].load(Ordering::SeqCst) {
            Err(RdmaError::RemoteCrashed { node })
        } else {
            Ok(())
        }
    }

    /// Whether a queue pair from `from` towards `to` can carry operations: both nodes are
    /// alive and the pair is not in the error state.
    pub(crate) fn queue_pair(&self, from: NodeId, to: NodeId) -> Result<(), RdmaError> {
        self.alive(from)?;
        self.alive(to)?;
        let pair = self.pair_index(from, to);
        if self.queue_pair_error[pair].load(Ordering::SeqCst)
            || self.refused[pair].load(Ordering::SeqCst)
        {
            return Err(RdmaError::QueuePairError { node: to });
        }
        Ok(())
    }

    /// `Err(RemoteAccess)` unless `to` lets `from` put into its memory now
    /// (`Op::SetWriteAccess`); a refusal puts the queue pairs from `from` towards `to` in
    /// error until `to` grants `from` write access again.
    pub(crate) fn may_write(&self, from: NodeId, to: NodeId, loc: Loc) -> Result<(), RdmaError> {
        if may_write(self.writers[to.index()].load(Ordering::SeqCst), from) {
            return Ok(());
        }
        self.refused[self.pair_index(from, to)].store(true, Ordering::SeqCst);
        Err(RdmaError::RemoteAccess { loc })
    }

    /// `Op::SetWriteAccess` by a thread of `node`: from now on only `writers` may put into
    /// its memory; the refused queue pairs of the granted nodes towards it are reconnected.
    pub(crate) fn set_writers(&self, node: NodeId, writers: u64) -> Result<(), RdmaError> {
        check_writers(writers, self.words.len())?;
        self.alive(node)?;
        self.writers[node.index()].store(writers, Ordering::SeqCst);
        for from in self
            .layout
            .node_ids()
            .filter(|&from| may_write(writers, from))
        {
            self.refused[self.pair_index(from, node)].store(false, Ordering::SeqCst);
        }
        Ok(())
    }

    /// Marks `node` crashed.
    pub(crate) fn crash(&self, node: NodeId) {
        self.crashed[node.index()].store(true, Ordering::SeqCst);
    }

    /// A new process on crashed `node`: its memory zeroed, every node may write into it,
    /// and the queue pairs of the other nodes towards it in the error state until each
    /// [`Memory::reconnect`]s (their connections ended with the old process).
    pub(crate) fn restart(&self, node: NodeId) {
        assert!(
            self.crashed[node.index()].load(Ordering::SeqCst),
            "restart: only a crashed node starts again"
        );
        // Relaxed: nobody reads a crashed node's words, and the SeqCst store of
        // `crashed` below publishes the zeros to every thread that sees the node up again
        // (a release: a 4 MiB service's memory, 22 MiB of words, took 12–25 ms to zero
        // with a fence per word, on the caller's thread — `velos bench bank`).
        for word in &self.words[node.index()] {
            word.store(0, Ordering::Relaxed);
        }
        self.writers[node.index()].store(u64::MAX, Ordering::SeqCst);
        for from in self.layout.node_ids().filter(|&from| from != node) {
            let pair = self.pair_index(from, node);
            self.queue_pair_error[pair].store(true, Ordering::SeqCst);
            self.refused[pair].store(false, Ordering::SeqCst);
            self.unmet[pair].store(true, Ordering::SeqCst);
        }
        self.crashed[node.index()].store(false, Ordering::SeqCst);
    }

    /// New queue pairs from `from` towards `to`: out of the error state, and `from` has
    /// met the process now in `to`'s place.
    pub(crate) fn reconnect(&self, from: NodeId, to: NodeId) {
        let pair = self.pair_index(from, to);
        self.queue_pair_error[pair].store(false, Ordering::SeqCst);
        self.refused[pair].store(false, Ordering::SeqCst);
        self.unmet[pair].store(false, Ordering::SeqCst);
    }

    /// `Op::Disconnect` by `node`: the queue pairs between it and `peer`, both ways, in
    /// the error state (until a new process in one's place reconnects).
    ///
    /// Rule (disconnect the process met): the cut is of the process in `peer`'s place
    /// that `node` is connected to. If a new one started there that `node` has not met
    /// yet, the old one is gone already and the new one's queue pairs towards `node` are
    /// its own: only `node`'s side is cut (it stays so until `node` meets the new one).
    pub(crate) fn disconnect(&self, node: NodeId, peer: NodeId) -> Result<(), RdmaError> {
        if peer == node || !self.has_node(peer) {
            return Err(RdmaError::UnknownNode { node: peer });
        }
        self.alive(node)?;
        self.set_queue_pair_error(node, peer);
        let met = !self.unmet[self.pair_index(node, peer)].load(Ordering::SeqCst);
        if met {
            self.set_queue_pair_error(peer, node);
        }
        assert!(self.queue_pair(node, peer).is_err());
        assert!(!met || self.queue_pair(peer, node).is_err());
        Ok(())
    }

    /// Puts the queue pairs from `from` towards `to` into the error state.
    pub(crate) fn set_queue_pair_error(&self, from: NodeId, to: NodeId) {
        self.queue_pair_error[self.pair_index(from, to)].store(true, Ordering::SeqCst);
    }

    /// A copy of every word, node by node.
    pub(crate) fn snapshot(&self) -> Vec<Vec<u64>> {
        self.words
            .iter()
            .map(|region| region.iter().map(|w| w.load(Ordering::SeqCst)).collect())
            .collect()
    }

    fn pair_index(&self, from: NodeId, to: NodeId) -> usize {
        assert!(self.has_node(from), "unknown node {from}");
        assert!(self.has_node(to), "unknown node {to}");
        from.index() * self.words.len() + to.index()
    }
}
