//! fompi: the baseline reader-writer lock of the RMA-locks evaluation, in the style of
//! foMPI's `MPI_Win_lock` (Gerstenberger et al.): one 64-bit lock word on a home node.
//! Bit 0 is the writer bit; the bits above count readers (each reader adds 2).
//!
//! * Write lock: remote CAS 0 → 1; while it fails, spin with gets of the word until it
//!   reads 0, then try the CAS again.
//! * Read lock: remote FAA +2; if the old value had the writer bit set, spin with gets
//!   while the bit stays set. (The reader stays counted while it spins, so a waiting
//!   writer cannot slip in: readers have priority, as in foMPI.)
//! * Read unlock: remote FAA −2 (a wrapping add of `2.wrapping_neg()`).
//! * Write unlock: remote FAA −1. Not CAS 1 → 0: readers announce themselves with their
//!   FAA +2 even while a writer holds the lock, so at unlock the word may be `1 + 2k`; a
//!   CAS 1 → 0 would then fail and need a read-and-retry loop (another round trip for
//!   each arriving reader), while FAA −1 clears the writer bit in one atomic whatever
//!   the reader count is.
//!
//! Both unlocks first issue a remote fence towards the home node, so that the critical
//! section's operations towards it (the data a window lock protects lives there) are
//! complete before the lock word changes, and then wait for their FAA, as foMPI's
//! blocking `MPI_Win_unlock` does. Every atomic and get lands in the participant's own
//! scratch word.

use super::fetch::{Access, ReadWord};
use super::{FetchAtomic, Routine, Yield, done_of, first_op, library_work_id};
use crate::error::RdmaError;
use crate::ids::{Loc, NodeId, WorkId};
use crate::layout_builder::LayoutBuilder;
use crate::op::{Op, Reply, Rmw};
use crate::shared::Shared;

const LIBRARY: u32 = 7;
const WRITE_LOCK_WORK_ID: WorkId = library_work_id(LIBRARY, 1);
const READ_LOCK_WORK_ID: WorkId = library_work_id(LIBRARY, 2);
const READ_UNLOCK_WORK_ID: WorkId = library_work_id(LIBRARY, 3);
const WRITE_UNLOCK_WORK_ID: WorkId = library_work_id(LIBRARY, 4);

/// The writer bit of the lock word.
pub const WRITER: u64 = 1;
/// What one reader adds to the lock word.
pub const READER: u64 = 2;

/// The words of one foMPI-style reader-writer lock.
#[derive(Debug)]
pub struct FompiRw {
    home: NodeId,
    word: Loc,
    /// Per participant: its node.
    nodes: Vec<NodeId>,
    /// Per participant: where remote results land, on its node.
    scratch: Vec<Loc>,
}

impl FompiRw {
    /// Allocates a lock whose word lives on `home`, for participants on `nodes`.
    pub fn new(layout: &mut LayoutBuilder, home: NodeId, nodes: &[NodeId]) -> Shared<FompiRw> {
        assert!(!nodes.is_empty(), "a lock has participants");
        Shared::new(FompiRw {
            home,
            word: layout.alloc(home),
            nodes: nodes.to_vec(),
            scratch: nodes.iter().map(|&n| layout.alloc(n)).collect(),
        })
    }

    /// The node holding the lock word.
    pub fn home(&self) -> NodeId {
        self.home
    }

    /// The lock word: writer bit 0, reader count × 2 above it.
    pub fn word(&self) -> Loc {
        self.word
    }

    /// The words only participant `slot` ever touches (its scratch word).
    pub fn private_words(&self, slot: usize) -> Vec<Loc> {
        vec![self.scratch[slot]]
    }

    /// Number of participants.
    pub fn participants(&self) -> usize {
        self.nodes.len()
    }

    fn check(&self, slot: usize) {
        assert!(
            slot < self.participants(),
            "fompi: unknown participant {slot}"
        );
    }

    /// Participant `slot` starts reading the lock word: a get into its scratch word, the
    /// wait, the load.
    fn read_word(&self, slot: usize, work_id: WorkId) -> Result<(ReadWord, Op), RdmaError> {
        let mut read = ReadWord::new(self.word, Access::Nic, self.scratch[slot], work_id);
        let op = first_op(&mut read)?;
        Ok((read, op))
    }
}

/// Participant `slot` takes `lock` for writing (exclusively).
pub fn write_lock(lock: &Shared<FompiRw>, slot: usize) -> WriteLock {
    lock.check(slot);
    WriteLock {
        lock: lock.clone(),
        slot,
        state: WriteLockState::Start,
    }
}

/// Participant `slot` takes `lock` for reading (shared).
pub fn read_lock(lock: &Shared<FompiRw>, slot: usize) -> ReadLock {
    lock.check(slot);
    ReadLock {
        lock: lock.clone(),
        slot,
        state: ReadLockState::Start,
    }
}

/// Participant `slot` releases its write lock on `lock`: FAA −1 (clears the writer bit).
pub fn write_unlock(lock: &Shared<FompiRw>, slot: usize) -> Unlock {
    lock.check(slot);
    Unlock {
        lock: lock.clone(),
        slot,
        add: WRITER.wrapping_neg(),
        work_id: WRITE_UNLOCK_WORK_ID,
        state: UnlockState::Start,
    }
}

/// Participant `slot` releases its read lock on `lock`: FAA −2.
pub fn read_unlock(lock: &Shared<FompiRw>, slot: usize) -> Unlock {
    lock.check(slot);
    Unlock {
        lock: lock.clone(),
        slot,
        add: READER.wrapping_neg(),
        work_id: READ_UNLOCK_WORK_ID,
        state: UnlockState::Start,
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum WriteLockState {
    Start,
    /// The CAS 0 → 1, its wait and the load of the old value.
    Cas(FetchAtomic),
    /// Reading the lock word (get, wait, load) until it reads 0.
    Spinning(ReadWord),
}

/// A write-lock acquire in progress.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct WriteLock {
    lock: Shared<FompiRw>,
    slot: usize,
    state: WriteLockState,
}

impl WriteLock {
    fn cas(&self) -> Result<(WriteLockState, Op), RdmaError> {
        let cas = Rmw::Cas {
            expected: 0,
            new: WRITER,
        };
        let (scratch, word) = (self.lock.scratch[self.slot], self.lock.word);
        let mut fetch = FetchAtomic::new(scratch, word, cas, WRITE_LOCK_WORK_ID);
        let op = first_op(&mut fetch)?;
        Ok((WriteLockState::Cas(fetch), op))
    }

    fn spin(&self) -> Result<(WriteLockState, Op), RdmaError> {
        let (read, op) = self.lock.read_word(self.slot, WRITE_LOCK_WORK_ID)?;
        Ok((WriteLockState::Spinning(read), op))
    }
}

impl Routine for WriteLock {
    type Output = ();

    fn resume(&mut self, reply: Reply) -> Result<Yield<()>, RdmaError> {
        let (state, op) = match self.state {
            WriteLockState::Start => {
                done_of(reply)?;
                self.cas()?
            }
            WriteLockState::Cas(ref mut fetch) => match fetch.resume(reply)? {
                Yield::Op(op) => return Ok(Yield::Op(op)),
                Yield::Done(0) => return Ok(Yield::Done(())),
                Yield::Done(_) => self.spin()?,
            },
            WriteLockState::Spinning(ref mut read) => match read.resume(reply)? {
                Yield::Op(op) => return Ok(Yield::Op(op)),
                Yield::Done(0) => self.cas()?,
                Yield::Done(_) => self.spin()?,
            },
        };
        self.state = state;
        Ok(Yield::Op(op))
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum ReadLockState {
    Start,
    /// The FAA +2, its wait and the load of the old value.
    Faa(FetchAtomic),
    /// Reading the lock word (get, wait, load) while the writer bit is set.
    Spinning(ReadWord),
}

/// A read-lock acquire in progress.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ReadLock {
    lock: Shared<FompiRw>,
    slot: usize,
    state: ReadLockState,
}

impl ReadLock {
    fn spin(&self) -> Result<(ReadLockState, Op), RdmaError> {
        let (read, op) = self.lock.read_word(self.slot, READ_LOCK_WORK_ID)?;
        Ok((ReadLockState::Spinning(read), op))
    }
}

impl Routine for ReadLock {
    type Output = ();

    fn resume(&mut self, reply: Reply) -> Result<Yield<()>, RdmaError> {
        let scratch = self.lock.scratch[self.slot];
        let (state, op) = match self.state {
            ReadLockState::Start => {
                done_of(reply)?;
                let faa = Rmw::Faa { add: READER };
                let mut fetch = FetchAtomic::new(scratch, self.lock.word, faa, READ_LOCK_WORK_ID);
                let op = first_op(&mut fetch)?;
                (ReadLockState::Faa(fetch), op)
            }
            ReadLockState::Faa(ref mut fetch) => match fetch.resume(reply)? {
                Yield::Op(op) => return Ok(Yield::Op(op)),
                Yield::Done(old) if old & WRITER == 0 => return Ok(Yield::Done(())),
                Yield::Done(_) => self.spin()?,
            },
            ReadLockState::Spinning(ref mut read) => match read.resume(reply)? {
                Yield::Op(op) => return Ok(Yield::Op(op)),
                Yield::Done(word) if word & WRITER == 0 => return Ok(Yield::Done(())),
                Yield::Done(_) => self.spin()?,
            },
        };
        self.state = state;
        Ok(Yield::Op(op))
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum UnlockState {
    Start,
    Fenced,
    Posted,
    Waited,
}

/// A read or write unlock in progress: remote fence, FAA, wait.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Unlock {
    lock: Shared<FompiRw>,
    slot: usize,
    add: u64,
    work_id: WorkId,
    state: UnlockState,
}

impl Routine for Unlock {
    type Output = ();

    fn resume(&mut self, reply: Reply) -> Result<Yield<()>, RdmaError> {
        done_of(reply)?;
        let (state, op) = match self.state {
            UnlockState::Start => (
                UnlockState::Fenced,
                Op::Rfence {
                    node: self.lock.home,
                },
            ),
            UnlockState::Fenced => (
                UnlockState::Posted,
                Op::Atomic {
                    local: self.lock.scratch[self.slot],
                    remote: self.lock.word,
                    rmw: Rmw::Faa { add: self.add },
                    work_id: self.work_id,
                },
            ),
            UnlockState::Posted => (
                UnlockState::Waited,
                Op::Wait {
                    work_id: self.work_id,
                },
            ),
            UnlockState::Waited => return Ok(Yield::Done(())),
        };
        self.state = state;
        Ok(Yield::Op(op))
    }
}
