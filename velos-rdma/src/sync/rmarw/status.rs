//! The STATUS word of a DQ queue node: one 64-bit value that tells a waiting writer, in a
//! single put, whether to keep spinning, to climb to the parent level, to acquire the lock
//! from the readers, or that it holds the lock, together with the counts of consecutive
//! acquires it continues.
//!
//! Layout: WAITING = 0, ACQUIRE_PARENT = 1, MODE_CHANGE = 2 (the paper's two dedicated
//! values); every other value has bit 63 set (a grant) and carries, for each level `i` from
//! the root to the granted level, the count of consecutive acquires within the element of
//! that level in bits `15 i .. 15 i + 15`. The paper's STATUS carries one count; a grant
//! here carries the counts of every level above too, because they belong to the cohort that
//! holds those levels, and the grantee is the one that will have to release them.

/// Spin: nothing decided yet.
pub(super) const WAITING: u64 = 0;
/// The predecessor released the parent level: acquire the lock at level `i - 1`.
pub(super) const ACQUIRE_PARENT: u64 = 1;
/// At the root: the predecessor passed the lock to the readers; acquire it from them.
pub(super) const MODE_CHANGE: u64 = 2;

const GRANT: u64 = 1 << 63;
const COUNT_BITS: u32 = 15;

/// The most levels a grant carries counts for.
pub(super) const MAX_LEVELS: usize = 4;
/// The largest count (and so the largest T_L,i).
pub(super) const COUNT_MAX: u64 = (1 << COUNT_BITS) - 1;

const _: () = assert!(
    MAX_LEVELS as u32 * COUNT_BITS < 63,
    "counts stay below the grant bit"
);

/// A decoded STATUS word.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) enum Status {
    /// Keep spinning.
    Waiting,
    /// Climb: acquire the parent level.
    AcquireParent,
    /// Acquire the lock from the readers (root only).
    ModeChange,
    /// The lock is passed, with these counts.
    Grant(Counts),
}

impl Status {
    /// Decodes a STATUS word.
    pub(super) fn decode(word: u64) -> Status {
        match word {
            WAITING => Status::Waiting,
            ACQUIRE_PARENT => Status::AcquireParent,
            MODE_CHANGE => Status::ModeChange,
            w => {
                assert!(w & GRANT != 0, "rma-rw: STATUS {w:#x} is no status");
                Status::Grant(Counts(w & !GRANT))
            }
        }
    }
}

/// The counts of consecutive acquires, one per level, packed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) struct Counts(u64);

impl Counts {
    /// Count 1 at every level `0..levels`: the lock was just acquired from the readers
    /// and every level below was entered first.
    pub(super) fn first(levels: usize) -> Counts {
        (0..levels).fold(Counts(0), |c, level| c.with(level, 1))
    }

    /// The packed counts, as stored in the holder's private word.
    pub(super) fn word(self) -> u64 {
        self.0
    }

    /// From the holder's private word.
    pub(super) fn from_word(word: u64) -> Counts {
        assert!(word & GRANT == 0, "rma-rw: held counts have no grant bit");
        Counts(word)
    }

    /// The count of `level`.
    pub(super) fn get(self, level: usize) -> u64 {
        assert!(level < MAX_LEVELS, "rma-rw: level {level} has no count");
        (self.0 >> (COUNT_BITS * level as u32)) & COUNT_MAX
    }

    /// The same counts with `level`'s set to `count`.
    pub(super) fn with(self, level: usize, count: u64) -> Counts {
        assert!(level < MAX_LEVELS, "rma-rw: level {level} has no count");
        assert!(
            (1..=COUNT_MAX).contains(&count),
            "rma-rw: a count is in 1..=T_L"
        );
        let shift = COUNT_BITS * level as u32;
        Counts((self.0 & !(COUNT_MAX << shift)) | (count << shift))
    }

    /// The STATUS word that grants the lock at `level` with these counts, the deeper
    /// levels' cleared (the grantee enters those itself).
    pub(super) fn grant(self, level: usize) -> u64 {
        assert!(level < MAX_LEVELS, "rma-rw: level {level} has no count");
        let kept = COUNT_BITS * (level as u32 + 1);
        let counts = self.0 & ((1u64 << kept) - 1);
        assert!(self.get(level) >= 1, "rma-rw: a grant has a count");
        GRANT | counts
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grants_round_trip_and_never_collide_with_signals() {
        let c = Counts::first(3).with(1, 7).with(2, COUNT_MAX);
        assert_eq!((c.get(0), c.get(1), c.get(2)), (1, 7, COUNT_MAX));
        let w = c.grant(1);
        assert!(![WAITING, ACQUIRE_PARENT, MODE_CHANGE].contains(&w));
        let Status::Grant(g) = Status::decode(w) else {
            panic!("a grant")
        };
        assert_eq!((g.get(0), g.get(1), g.get(2)), (1, 7, 0));
        assert_eq!(Status::decode(MODE_CHANGE), Status::ModeChange);
        assert_eq!(Counts::from_word(c.word()), c);
    }
}
