//! More invisible steps for the explorer's reduction: remote steps that only move an
//! operation along its queue pair, and commits to words that only remote atomics touch.
//! (The first cases are in `Machine::is_invisible`; see `explore.rs` for why an invisible
//! step may be explored alone.)

use super::items::{PipeItem, RemoteWrite};
use super::state::Machine;
use super::transition::Transition;
use velos_rdma::{Loc, Process};

/// The owner-table mark of a word that only remote atomics ever touch.
const ATOMIC_ONLY: u32 = u32::MAX;

impl<P: Process> Machine<P> {
    /// Declares that only remote atomics (CAS, FAA) ever touch `loc`: no CPU access, no put,
    /// no get. An acceptor word of the consensus engine is one. The remote-atomic lock
    /// `L[n]` then orders every access to it, so the commit of an atomic write to it
    /// commutes with everything else.
    pub fn set_atomic_only(&mut self, loc: Loc) {
        self.mark_owner(loc, ATOMIC_ONLY);
    }

    /// Whether `loc` was declared atomic-only.
    pub fn is_atomic_only(&self, loc: Loc) -> bool {
        loc.word_index()
            .and_then(|i| self.owner.get(loc.node.index())?.get(i).copied())
            .is_some_and(|o| o == ATOMIC_ONLY)
    }

    /// Invisible steps beyond [`Machine::is_invisible`], each commuting with every step that
    /// can be enabled before it, disabling none and disabled by none, writing no word that
    /// anything but remote atomics reads:
    /// * rules 3 and 12 (a put's or an atomic's remote write is issued into `rW`) when no
    ///   older get or remote atomic in the same pipe still waits for `rW` to be empty (the
    ///   only premises a non-empty `rW` can falsify; newer items are behind this one);
    /// * rule 7 (a get's or atomic's result enters `lW`) for a thread that never puts from
    ///   memory: `lW`'s contents matter only to rule 2, a put's local read;
    /// * rule 13 (an atomic write commits) to an atomic-only word.
    pub fn is_invisible_remote(&self, transition: Transition) -> bool {
        if self.mutation.is_some() {
            return false;
        }
        match transition {
            Transition::Pipe(q, i) => {
                let pipe = &self.qps[q].pipe;
                let older_reads = || {
                    pipe.iter().take(i).any(|e| {
                        matches!(
                            e.item,
                            PipeItem::GetRead { .. } | PipeItem::AtomicRead { .. }
                        )
                    })
                };
                match pipe[i].item {
                    PipeItem::PutWrite { .. }
                    | PipeItem::PutWords { .. }
                    | PipeItem::AtomicWrite { .. } => !older_reads(),
                    PipeItem::LocalWrite { .. } => {
                        let (t, _) = self.qp_ends(q);
                        i == 0 && !self.threads[t].process.puts_from_memory()
                    }
                    _ => false,
                }
            }
            Transition::RemoteCommit(q, 0) => match self.qps[q].rw.front().map(|e| &e.item) {
                Some(RemoteWrite::Atomic { loc, .. }) => self.is_atomic_only(*loc),
                _ => false,
            },
            _ => false,
        }
    }
}
