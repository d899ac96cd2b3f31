//! The configuration of an RMA-RW lock: the machine hierarchy, the thresholds, and the
//! checks that reject a bad one.

use super::counter;
use super::status;
use crate::ids::NodeId;
use thiserror::Error;

/// How an RMA-RW lock is laid out over the machine and how it trades fairness for locality.
///
/// * `levels[i][slot]` is the element (any `u32` id) that participant `slot` belongs to at
///   level `i` of the distributed tree DT: level 0 is the root (a single element), the last
///   level the finest (for example one element per node). Elements must nest: participants
///   that share an element at level `i` share one at every level above. This is the
///   paper's e(p, i).
/// * `t_dc` is T_DC: one physical counter of the distributed counter DC per `t_dc`
///   consecutive participants (the paper's c(p) = ⌈p / T_DC⌉), located at the node of the
///   first of them.
/// * `t_l[i]` is T_L,i: how many times in a row the lock may pass between writers of one
///   element of level `i` before it leaves the element (at the root: before it goes to the
///   readers).
/// * `t_r` is T_R: how many readers may be admitted at one physical counter (by its budget)
///   while a writer waits at the root, before further readers wait for that writer.
///
/// The guarantees, exactly (C = ⌈participants / T_DC⌉ physical counters, P participants;
/// a reader *waits* once its arrival completed, a writer once it is queued at the root —
/// see `ReadLock::announced` and `WriteLock::announced`):
/// * while a reader waits, at most T_W = ∏ T_L,i writers enter in a row;
/// * while a writer waits, at most C · T_R + 2P readers enter in a row, and at most
///   C · T_R + P of them arrived after the later of the writer's announcement and the last
///   writer's entry (the others were already past their counter's check).
///
/// `paper-notes/rma-rw.md` has the arguments; `velos-sim/tests/rmarw_fairness.rs` checks
/// both after every step of seeded simulations.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct RmaRwConfig {
    /// Per level (0 = root), per participant: its element at that level.
    pub levels: Vec<Vec<u32>>,
    /// T_DC: participants per physical counter.
    pub t_dc: usize,
    /// Per level (0 = root): T_L,i.
    pub t_l: Vec<u64>,
    /// T_R: the reader threshold.
    pub t_r: u64,
}

impl RmaRwConfig {
    /// The two-level tree of the paper's evaluation: the root, and one element per node
    /// (participant `slot` runs on `nodes[slot]`). `t_l_node` is T_L of the node level,
    /// `t_l_root` T_L of the root.
    pub fn two_level(
        nodes: &[NodeId],
        t_dc: usize,
        t_l_node: u64,
        t_l_root: u64,
        t_r: u64,
    ) -> RmaRwConfig {
        RmaRwConfig {
            levels: vec![
                vec![0; nodes.len()],
                nodes.iter().map(|n| u32::from(n.0)).collect(),
            ],
            t_dc,
            t_l: vec![t_l_root, t_l_node],
            t_r,
        }
    }

    /// T_W = ∏ T_L,i: at most this many writers enter in a row while a reader waits
    /// (saturating at `u64::MAX`).
    pub fn t_w(&self) -> u64 {
        self.t_l.iter().fold(1u64, |w, &t| w.saturating_mul(t))
    }

    /// Checks the configuration for `participants` participants.
    pub fn check(&self, participants: usize) -> Result<(), RmaRwConfigError> {
        if participants == 0 {
            return Err(RmaRwConfigError::NoParticipants);
        }
        if participants > MAX_PARTICIPANTS {
            return Err(RmaRwConfigError::TooManyParticipants { participants });
        }
        if self.levels.is_empty() {
            return Err(RmaRwConfigError::NoLevels);
        }
        if self.levels.len() > status::MAX_LEVELS {
            return Err(RmaRwConfigError::TooManyLevels {
                levels: self.levels.len(),
            });
        }
        for (level, elements) in self.levels.iter().enumerate() {
            if elements.len() != participants {
                return Err(RmaRwConfigError::LevelLength {
                    level,
                    len: elements.len(),
                    participants,
                });
            }
        }
        if self.levels[0].iter().any(|&e| e != self.levels[0][0]) {
            return Err(RmaRwConfigError::RootNotSingle);
        }
        for level in 1..self.levels.len() {
            for a in 0..participants {
                for b in a + 1..participants {
                    if self.levels[level][a] == self.levels[level][b]
                        && self.levels[level - 1][a] != self.levels[level - 1][b]
                    {
                        return Err(RmaRwConfigError::NotNested { level, a, b });
                    }
                }
            }
        }
        if self.t_l.len() != self.levels.len() {
            return Err(RmaRwConfigError::ThresholdCount {
                thresholds: self.t_l.len(),
                levels: self.levels.len(),
            });
        }
        for (level, &t) in self.t_l.iter().enumerate() {
            if t == 0 || t > status::COUNT_MAX {
                return Err(RmaRwConfigError::LevelThreshold { level, t_l: t });
            }
        }
        if self.t_dc == 0 {
            return Err(RmaRwConfigError::ZeroTdc);
        }
        if self.t_r == 0 || self.t_r > counter::T_R_MAX {
            return Err(RmaRwConfigError::ReaderThreshold { t_r: self.t_r });
        }
        Ok(())
    }
}

/// The most participants an RMA-RW lock takes (ranks and reader counts stay far from the
/// widths of their fields).
pub const MAX_PARTICIPANTS: usize = 1 << 16;

/// Why an [`RmaRwConfig`] cannot describe a lock.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Error)]
#[non_exhaustive]
pub enum RmaRwConfigError {
    /// A lock has participants.
    #[error("a lock has participants")]
    NoParticipants,
    /// More participants than [`MAX_PARTICIPANTS`].
    #[error("{participants} participants; at most {MAX_PARTICIPANTS}")]
    TooManyParticipants {
        /// How many were given.
        participants: usize,
    },
    /// `levels` is empty: the tree needs at least its root.
    #[error("no levels: the tree needs at least its root")]
    NoLevels,
    /// More levels than the STATUS word can carry counts for.
    #[error("{levels} levels; at most {}", status::MAX_LEVELS)]
    TooManyLevels {
        /// How many were given.
        levels: usize,
    },
    /// A level does not name an element for every participant.
    #[error("level {level} has {len} entries for {participants} participants")]
    LevelLength {
        /// The level.
        level: usize,
        /// Its length.
        len: usize,
        /// The number of participants.
        participants: usize,
    },
    /// Level 0 is the root: every participant must be in the same element.
    #[error("level 0 (the root) has more than one element")]
    RootNotSingle,
    /// Two participants share an element at `level` but not at `level - 1`.
    #[error("participants {a} and {b} share an element at level {level} but not above it")]
    NotNested {
        /// The level where they share an element.
        level: usize,
        /// One participant.
        a: usize,
        /// The other.
        b: usize,
    },
    /// `t_l` does not have one threshold per level.
    #[error("{thresholds} thresholds T_L for {levels} levels")]
    ThresholdCount {
        /// How many thresholds.
        thresholds: usize,
        /// How many levels.
        levels: usize,
    },
    /// A T_L,i of 0 (no writer could ever enter) or wider than its STATUS field.
    #[error(
        "T_L of level {level} is {t_l}; it must be in 1..={}",
        status::COUNT_MAX
    )]
    LevelThreshold {
        /// The level.
        level: usize,
        /// The threshold.
        t_l: u64,
    },
    /// T_DC of 0: a physical counter serves at least one participant.
    #[error("T_DC is 0; a physical counter serves at least one participant")]
    ZeroTdc,
    /// A T_R of 0 (no reader would be admitted while a writer waits, which the protocol's
    /// counting does not support) or wider than its field.
    #[error("T_R is {t_r}; it must be in 1..={}", counter::T_R_MAX)]
    ReaderThreshold {
        /// The threshold.
        t_r: u64,
    },
}
