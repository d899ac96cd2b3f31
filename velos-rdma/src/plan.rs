//! Region plans: which words of a node peers may reach, and how ([`Grant`], [`Access`]).
//!
//! A plan is a list of grants for one node's memory; what no grant covers is reachable by
//! the node's own CPU only. A grant is for every node (the owner included, through
//! loopback) or for one node only ([`Grant::only`]); grants may overlap only when they
//! are for two different single nodes, so that every node sees at most one grant per
//! word ([`check_plan`]). Plans are backend-neutral: the verbs backend registers one
//! memory region per grant with exactly its access (the NIC refuses the rest), and the
//! in-process backend can enforce them in software
//! (`mem::MemFabric::with_plans`).

use crate::ids::NodeId;
use crate::layout::Layout;
use std::ops::Range;

/// The remote access a [`Grant`] gives.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Access {
    /// RDMA READ only.
    Read,
    /// RDMA WRITE only.
    Write,
    /// RDMA READ and WRITE.
    ReadWrite,
    /// Remote atomics (compare-and-swap, fetch-and-add) only.
    Atomic,
    /// RDMA READ and remote atomics, no WRITE.
    ReadAtomic,
    /// READ, WRITE and atomics.
    All,
}

/// The kind of remote access an operation makes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RemoteKind {
    /// A get (RDMA READ).
    Read,
    /// A put (RDMA WRITE).
    Write,
    /// A remote compare-and-swap or fetch-and-add.
    Atomic,
}

impl Access {
    /// Whether this access allows `kind`.
    pub fn allows(self, kind: RemoteKind) -> bool {
        match kind {
            RemoteKind::Read => matches!(
                self,
                Access::Read | Access::ReadWrite | Access::ReadAtomic | Access::All
            ),
            RemoteKind::Write => matches!(self, Access::Write | Access::ReadWrite | Access::All),
            RemoteKind::Atomic => matches!(self, Access::Atomic | Access::ReadAtomic | Access::All),
        }
    }
}

/// A range of a node's words with the remote access it grants, to every node (this one
/// included) or to one node only.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Grant {
    /// The words, by word index in the node's memory (not empty).
    pub words: Range<u32>,
    /// What peers may do there.
    pub access: Access,
    /// The only node the grant is for, or `None` for every node.
    pub only: Option<NodeId>,
}

impl Grant {
    /// `access` to `words`, for every node.
    pub fn new(words: Range<u32>, access: Access) -> Grant {
        Grant {
            words,
            access,
            only: None,
        }
    }

    /// The same grant, for `peer` only.
    #[must_use]
    pub fn only(self, peer: NodeId) -> Grant {
        Grant {
            only: Some(peer),
            ..self
        }
    }

    /// Whether the grant is for `peer`.
    pub fn is_for(&self, peer: NodeId) -> bool {
        self.only.is_none_or(|only| only == peer)
    }

    /// Whether the grant covers word `word`.
    pub fn covers(&self, word: u32) -> bool {
        self.words.contains(&word)
    }
}

/// Whether `plan` lets `peer` make an access of `kind` to each of the `count` words from
/// `first` by one grant (a checked plan has at most one grant for `peer` over any word,
/// so then every word is permitted as [`permits`] says; `false` leaves the words to be
/// checked one by one).
pub fn permits_all(plan: &[Grant], peer: NodeId, first: u32, count: u32, kind: RemoteKind) -> bool {
    plan.iter()
        .find(|grant| grant.is_for(peer) && grant.covers(first))
        .is_some_and(|grant| {
            grant.access.allows(kind)
                && u64::from(first) + u64::from(count) <= u64::from(grant.words.end)
        })
}

/// Whether `plan` lets `peer` make an access of `kind` to word `word`.
pub fn permits(plan: &[Grant], peer: NodeId, word: u32, kind: RemoteKind) -> bool {
    plan.iter()
        .find(|grant| grant.is_for(peer) && grant.covers(word))
        .is_some_and(|grant| grant.access.allows(kind))
}

/// Checks a plan for node `node` of `layout`: every grant non-empty, inside the node's
/// words, for a node of the layout; two grants overlap only if they are for two different
/// single nodes. The error says which grant is wrong and why.
pub fn check_plan(layout: &Layout, node: NodeId, plan: &[Grant]) -> Result<(), String> {
    if node.0 >= layout.nodes() {
        return Err(format!("{node} is not a node of the layout"));
    }
    let words = layout.words(node);
    for (i, grant) in plan.iter().enumerate() {
        if grant.words.is_empty() || grant.words.end > words {
            return Err(format!(
                "grant {i} ({:?}) is empty or outside the node's {words} words",
                grant.words
            ));
        }
        if let Some(peer) = grant.only.filter(|peer| peer.0 >= layout.nodes()) {
            return Err(format!("grant {i} is for {peer}, not a node of the layout"));
        }
        let clash = |other: &Grant| {
            let overlap =
                other.words.start < grant.words.end && grant.words.start < other.words.end;
            let distinct_peers = matches!((other.only, grant.only), (Some(a), Some(b)) if a != b);
            overlap && !distinct_peers
        };
        if let Some(j) = plan[..i].iter().position(clash) {
            return Err(format!(
                "grants {j} and {i} overlap for the same node (overlapping grants must be \
                 for two different single nodes)"
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accesses_allow_what_they_name() {
        use RemoteKind::*;
        let table = [
            (Access::Read, [true, false, false]),
            (Access::Write, [false, true, false]),
            (Access::ReadWrite, [true, true, false]),
            (Access::Atomic, [false, false, true]),
            (Access::ReadAtomic, [true, false, true]),
            (Access::All, [true, true, true]),
        ];
        for (access, expected) in table {
            let got = [Read, Write, Atomic].map(|k| access.allows(k));
            assert_eq!(got, expected, "{access:?}");
        }
    }

    #[test]
    fn per_node_grants_may_overlap_and_each_node_sees_its_own() {
        let layout = Layout::uniform(3, 16);
        let plan = vec![
            Grant::new(0..4, Access::ReadAtomic),
            Grant::new(4..8, Access::ReadWrite).only(NodeId(1)),
            Grant::new(4..8, Access::Read).only(NodeId(0)),
            Grant::new(4..8, Access::Read).only(NodeId(2)),
        ];
        assert_eq!(check_plan(&layout, NodeId(0), &plan), Ok(()));
        assert!(permits(&plan, NodeId(1), 5, RemoteKind::Write));
        assert!(!permits(&plan, NodeId(2), 5, RemoteKind::Write));
        assert!(permits(&plan, NodeId(2), 5, RemoteKind::Read));
        assert!(!permits(&plan, NodeId(0), 0, RemoteKind::Write));
        assert!(permits(&plan, NodeId(0), 0, RemoteKind::Atomic));
        assert!(!permits(&plan, NodeId(0), 9, RemoteKind::Read), "no grant");
    }

    /// `permits_all` never says more than `permits` word by word on a checked plan, and
    /// says yes for every run of words inside one grant that allows the access.
    #[test]
    fn a_run_of_words_is_permitted_at_once_only_when_each_word_is() {
        let layout = Layout::uniform(3, 16);
        let plan = vec![
            Grant::new(0..4, Access::ReadAtomic),
            Grant::new(4..8, Access::ReadWrite).only(NodeId(1)),
            Grant::new(4..8, Access::Read).only(NodeId(2)),
            Grant::new(8..12, Access::All),
        ];
        assert_eq!(check_plan(&layout, NodeId(0), &plan), Ok(()));
        let mut at_once = 0;
        for peer in (0..3).map(NodeId) {
            for kind in [RemoteKind::Read, RemoteKind::Write, RemoteKind::Atomic] {
                for first in 0..16u32 {
                    for count in 1..=16 - first {
                        let each = (first..first + count).all(|w| permits(&plan, peer, w, kind));
                        let all = permits_all(&plan, peer, first, count, kind);
                        assert!(!all || each, "{peer} {kind:?} {first}+{count}");
                        let one_grant = plan.iter().any(|g| {
                            g.is_for(peer)
                                && g.access.allows(kind)
                                && g.words.start <= first
                                && first + count <= g.words.end
                        });
                        assert_eq!(all, one_grant, "{peer} {kind:?} {first}+{count}");
                        at_once += usize::from(all);
                    }
                }
            }
        }
        assert!(
            at_once > 50,
            "the premise: many runs are permitted at once ({at_once})"
        );
    }

    #[test]
    fn bad_plans_are_refused_with_the_reason() {
        let layout = Layout::uniform(2, 8);
        let check = |plan: &[Grant]| check_plan(&layout, NodeId(0), plan).unwrap_err();
        assert!(check(&[Grant::new(4..4, Access::Read)]).contains("empty or outside"));
        assert!(check(&[Grant::new(4..9, Access::Read)]).contains("empty or outside"));
        assert!(check(&[Grant::new(0..2, Access::Read).only(NodeId(2))]).contains("not a node"));
        let same = [
            Grant::new(0..4, Access::Read).only(NodeId(1)),
            Grant::new(2..6, Access::Write).only(NodeId(1)),
        ];
        assert!(check(&same).contains("overlap"));
        let everyone = [
            Grant::new(0..4, Access::Read),
            Grant::new(2..6, Access::Write).only(NodeId(1)),
        ];
        assert!(check(&everyone).contains("overlap"));
        assert!(
            check_plan(&layout, NodeId(2), &[])
                .unwrap_err()
                .contains("not a node")
        );
    }
}
