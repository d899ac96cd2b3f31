//! The registered memory this process holds: one memory region per node, over atomic
//! words, for every node of the layout (the single-process fabric) or for one (a
//! [`VerbsNode`](super::VerbsNode)).

use super::error::VerbsError;
use super::info::RemoteRange;
use crate::error::RdmaError;
use crate::ids::{Loc, NodeId};
use crate::layout::Layout;
use crate::plan::Grant;
use sideway::ibverbs::AccessFlags;
use sideway::ibverbs::memory_region::MemoryRegion;
use sideway::ibverbs::protection_domain::ProtectionDomain;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// Where a word is, for the NIC: its virtual address and the key of its region.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct WordAddress {
    /// The virtual address of the word.
    pub(super) addr: u64,
    /// The local key (for a local operand) or the remote key (for a remote one).
    pub(super) key: u32,
}

/// The registered region of one node.
#[derive(Debug)]
struct Region {
    /// The registration. Declared before `words` so that it is dropped (deregistered)
    /// before the words are freed.
    mr: Arc<MemoryRegion>,
    /// With a region plan: one registration per grant (and `mr` has local access only).
    /// Dropped before `words` too.
    grants: Vec<Granted>,
    /// The words; never moved or resized while registered. At least one word, even for a
    /// node with none (a zero-length registration may be refused); the layout's bounds
    /// still apply.
    words: Box<[AtomicU64]>,
}

/// One grant of a region plan and its registration.
#[derive(Debug)]
struct Granted {
    grant: Grant,
    mr: Arc<MemoryRegion>,
}

/// The words of the nodes this process holds, each node's in its own memory region of
/// the device's protection domain. CPU operations access the words as `SeqCst` atomics;
/// the NIC accesses them by DMA.
#[derive(Debug)]
pub(super) struct Memory {
    layout: Layout,
    /// One region per node, indexed by node; `None` for a node held by another process.
    regions: Vec<Option<Region>>,
}

impl Memory {
    /// Zeroed words for every node of `layout`, registered in `pd` for local write and
    /// remote read, write and atomics.
    pub(super) fn register(
        layout: Layout,
        pd: &Arc<ProtectionDomain>,
    ) -> Result<Memory, VerbsError> {
        Memory::register_nodes(layout, pd, |_| true, None)
    }

    /// Zeroed words for `node` of `layout` only, registered as by [`Memory::register`].
    pub(super) fn register_node(
        layout: Layout,
        pd: &Arc<ProtectionDomain>,
        node: NodeId,
    ) -> Result<Memory, VerbsError> {
        assert!(node.index() < usize::from(layout.nodes()));
        let memory = Memory::register_nodes(layout, pd, |held| held == node, None)?;
        assert!(memory.has_node(node));
        Ok(memory)
    }

    /// Zeroed words for `node` of `layout` only, registered as `plan` says: one region per
    /// grant with its access, and one over every word with local write access only. The
    /// plan has been checked.
    pub(super) fn register_planned(
        layout: Layout,
        pd: &Arc<ProtectionDomain>,
        node: NodeId,
        plan: &[Grant],
    ) -> Result<Memory, VerbsError> {
        assert!(node.index() < usize::from(layout.nodes()));
        let memory = Memory::register_nodes(layout, pd, |held| held == node, Some(plan))?;
        assert!(memory.has_node(node));
        Ok(memory)
    }

    /// Registers the nodes `held` selects.
    fn register_nodes(
        layout: Layout,
        pd: &Arc<ProtectionDomain>,
        held: impl Fn(NodeId) -> bool,
        plan: Option<&[Grant]>,
    ) -> Result<Memory, VerbsError> {
        let access = match plan {
            None => {
                AccessFlags::LocalWrite
                    | AccessFlags::RemoteWrite
                    | AccessFlags::RemoteRead
                    | AccessFlags::RemoteAtomic
            }
            Some(_) => AccessFlags::LocalWrite,
        };
        let regions = layout
            .node_ids()
            .map(|node| {
                if !held(node) {
                    return Ok(None);
                }
                let len = layout.words(node).max(1) as usize;
                let words: Box<[AtomicU64]> = (0..len).map(|_| AtomicU64::new(0)).collect();
                // SAFETY: the range is exactly the heap allocation of `words`, which the
                // `Region` keeps, unmoved and unresized, until after the registration is
                // dropped (field order); the NIC's writes go through `AtomicU64`s, which
                // allow mutation behind shared references.
                let mr = unsafe {
                    pd.reg_mr(
                        words.as_ptr() as usize,
                        len * size_of::<AtomicU64>(),
                        access,
                    )
                }
                .map_err(|e| VerbsError::verbs("ibv_reg_mr", e))?;
                let grants = plan
                    .unwrap_or_default()
                    .iter()
                    .map(|grant| {
                        let start = grant.words.start as usize;
                        let count = grant.words.len();
                        assert!(count > 0 && start + count <= len, "unchecked plan");
                        // SAFETY: the range lies inside the heap allocation of `words`
                        // (checked above), which lives, unmoved, until after this
                        // registration is dropped (field order of `Region`); the NIC's
                        // writes go through `AtomicU64`s.
                        let mr = unsafe {
                            pd.reg_mr(
                                words[start..].as_ptr() as usize,
                                count * size_of::<AtomicU64>(),
                                super::plan::flags(grant.access),
                            )
                        }
                        .map_err(|e| VerbsError::verbs("ibv_reg_mr", e))?;
                        Ok(Granted {
                            grant: grant.clone(),
                            mr,
                        })
                    })
                    .collect::<Result<Vec<_>, VerbsError>>()?;
                Ok(Some(Region { mr, grants, words }))
            })
            .collect::<Result<Vec<_>, VerbsError>>()?;
        let memory = Memory { layout, regions };
        assert_eq!(memory.regions.len(), usize::from(memory.layout.nodes()));
        Ok(memory)
    }

    /// The layout of the memory.
    pub(super) fn layout(&self) -> &Layout {
        &self.layout
    }

    /// Whether this process holds the words of `node` (a node of the layout).
    pub(super) fn has_node(&self, node: NodeId) -> bool {
        self.regions.get(node.index()).is_some_and(Option::is_some)
    }

    /// The word at `loc`, after checking alignment and bounds; the node must be one this
    /// process holds.
    pub(super) fn word(&self, loc: Loc) -> Result<&AtomicU64, RdmaError> {
        let index = self.layout.check(loc)?;
        Ok(&self.held(loc.node).words[index])
    }

    /// The words of `node`, a node this process holds.
    pub(super) fn words(&self, node: NodeId) -> Vec<u64> {
        let words = self.layout.words(node) as usize;
        let copy: Vec<u64> = self.held(node).words[..words]
            .iter()
            .map(|word| word.load(Ordering::SeqCst))
            .collect();
        assert_eq!(copy.len(), words);
        copy
    }

    /// The registered address and rkey of `node`'s region, a node this process holds:
    /// what a peer needs to reach it.
    pub(super) fn region_key(&self, node: NodeId) -> WordAddress {
        let region = self.held(node);
        WordAddress {
            addr: region.words.as_ptr() as u64,
            key: region.mr.rkey(),
        }
    }

    /// The grants of `node`'s region plan whose keys `peer` receives, as ranges and keys
    /// (none without a plan).
    pub(super) fn range_keys(&self, node: NodeId, peer: NodeId) -> Vec<RemoteRange> {
        self.held(node)
            .grants
            .iter()
            .filter(|granted| granted.grant.is_for(peer))
            .map(|granted| RemoteRange {
                start: granted.grant.words.start,
                words: granted.grant.words.len() as u32,
                rkey: granted.mr.rkey(),
            })
            .collect()
    }

    /// The address and local key of the word at `loc`, a location already checked.
    pub(super) fn local(&self, loc: Loc) -> WordAddress {
        let region = self.region(loc);
        WordAddress {
            addr: self.addr(region, loc),
            key: region.mr.lkey(),
        }
    }

    /// The address and remote key of the word at `loc`, a location already checked.
    pub(super) fn remote(&self, loc: Loc) -> WordAddress {
        let region = self.region(loc);
        WordAddress {
            addr: self.addr(region, loc),
            key: region.mr.rkey(),
        }
    }

    /// The registration of `node`'s region (the permission routes' timing test).
    #[cfg(test)]
    pub(super) fn registration(&self, node: NodeId) -> &MemoryRegion {
        &self.held(node).mr
    }

    /// A copy of every node's words, node by node; every node must be held here.
    pub(super) fn snapshot(&self) -> Vec<Vec<u64>> {
        self.layout
            .node_ids()
            .map(|node| self.words(node))
            .collect()
    }

    /// The region of `node`, a node this process holds (the callers check).
    fn held(&self, node: NodeId) -> &Region {
        self.regions[node.index()]
            .as_ref()
            .unwrap_or_else(|| panic!("{node}'s memory is not held by this process"))
    }

    fn region(&self, loc: Loc) -> &Region {
        debug_assert!(self.layout.check(loc).is_ok(), "unchecked location {loc}");
        self.held(loc.node)
    }

    fn addr(&self, region: &Region, loc: Loc) -> u64 {
        let addr = region.words.as_ptr() as u64 + u64::from(loc.offset);
        debug_assert_eq!(region.mr.get_ptr() as u64 + u64::from(loc.offset), addr);
        addr
    }
}
