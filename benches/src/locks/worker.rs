//! The benchmark's process: acquire, critical section, release, think, forever (or a fixed
//! number of times), over any of the benchmarked locks.

use velos_rdma::sync::{Routine, Yield, dmcs, fompi, nlock, rmarw};
use velos_rdma::{Loc, Op, Process, RdmaError, Reply, Shared, Step};

/// A lock under test, as every worker shares it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) enum LockRef {
    /// The topology-aware reader-writer lock of the RMA-locks paper.
    RmaRw(Shared<rmarw::RmaRw>),
    /// The foMPI-style baseline.
    Fompi(Shared<fompi::FompiRw>),
    /// The rdma-rmw paper's node lock (a ticket lock): exclusive only.
    Nlock(Shared<nlock::NLock>),
    /// The distributed MCS queue lock: exclusive only.
    Dmcs(Shared<dmcs::Dmcs>),
}

impl LockRef {
    /// Whether the lock distinguishes readers from writers.
    fn shared_readers(&self) -> bool {
        match self {
            LockRef::RmaRw(_) | LockRef::Fompi(_) => true,
            LockRef::Nlock(_) | LockRef::Dmcs(_) => false,
        }
    }

    fn acquire(&self, slot: usize, writer: bool) -> Acquire {
        match self {
            LockRef::RmaRw(l) if writer => Acquire::RmaRwWrite(rmarw::write_lock(l, slot)),
            LockRef::RmaRw(l) => Acquire::RmaRwRead(rmarw::read_lock(l, slot)),
            LockRef::Fompi(l) if writer => Acquire::FompiWrite(fompi::write_lock(l, slot)),
            LockRef::Fompi(l) => Acquire::FompiRead(fompi::read_lock(l, slot)),
            LockRef::Nlock(l) => Acquire::Nlock(nlock::acquire(l, slot)),
            LockRef::Dmcs(l) => Acquire::Dmcs(dmcs::acquire(l, slot)),
        }
    }

    fn release(&self, slot: usize, writer: bool) -> Release {
        match self {
            LockRef::RmaRw(l) if writer => Release::RmaRwWrite(rmarw::write_unlock(l, slot)),
            LockRef::RmaRw(l) => Release::RmaRwRead(rmarw::read_unlock(l, slot)),
            LockRef::Fompi(l) if writer => Release::Fompi(fompi::write_unlock(l, slot)),
            LockRef::Fompi(l) => Release::Fompi(fompi::read_unlock(l, slot)),
            LockRef::Nlock(l) => Release::Nlock(nlock::release(l, slot)),
            LockRef::Dmcs(l) => Release::Dmcs(dmcs::release(l, slot)),
        }
    }
}

/// An acquire of any lock.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Acquire {
    RmaRwWrite(rmarw::WriteLock),
    RmaRwRead(rmarw::ReadLock),
    FompiWrite(fompi::WriteLock),
    FompiRead(fompi::ReadLock),
    Nlock(nlock::Acquire),
    Dmcs(dmcs::Acquire),
}

impl Acquire {
    fn resume(&mut self, reply: Reply) -> Result<Yield<()>, RdmaError> {
        match self {
            Acquire::RmaRwWrite(r) => r.resume(reply),
            Acquire::RmaRwRead(r) => r.resume(reply),
            Acquire::FompiWrite(r) => r.resume(reply),
            Acquire::FompiRead(r) => r.resume(reply),
            Acquire::Nlock(r) => r.resume(reply),
            Acquire::Dmcs(r) => r.resume(reply),
        }
    }
}

/// A release of any lock.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Release {
    RmaRwWrite(rmarw::WriteUnlock),
    RmaRwRead(rmarw::ReadUnlock),
    Fompi(fompi::Unlock),
    Nlock(nlock::Release),
    Dmcs(dmcs::Release),
}

impl Release {
    fn resume(&mut self, reply: Reply) -> Result<Yield<()>, RdmaError> {
        match self {
            Release::RmaRwWrite(r) => r.resume(reply),
            Release::RmaRwRead(r) => r.resume(reply),
            Release::Fompi(r) => r.resume(reply),
            Release::Nlock(r) => r.resume(reply),
            Release::Dmcs(r) => r.resume(reply),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Phase {
    /// Between two acquisitions: decide reader or writer next.
    Idle,
    Acquiring(Acquire),
    /// In the critical section with `left` local operations to go.
    Critical {
        left: u32,
    },
    Releasing(Release),
    /// Thinking with `left` local operations to go.
    Thinking {
        left: u32,
    },
    Finished,
}

/// What every worker of a run does, besides its lock.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Workload {
    /// Probability of a writer acquire, in millionths.
    pub writer_ppm: u32,
    /// Local operations in the critical section: one store, then loads.
    pub cs_ops: u32,
    /// Local loads between a release and the next acquire.
    pub think_ops: u32,
    /// Acquisitions before the worker finishes (`None`: never).
    pub limit: Option<u64>,
}

/// One benchmark process. Its PRNG (SplitMix64) is part of its state, so a run is fixed by
/// the seeds alone.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Worker {
    lock: LockRef,
    slot: usize,
    rng: u64,
    work: Workload,
    /// A word of the worker's own, on its node: the critical section touches it.
    own: Loc,
    phase: Phase,
    /// Whether the current (or last) acquire is a writer's.
    pub writer: bool,
    /// Acquires started.
    pub started: u64,
    /// Acquires completed: critical sections entered.
    pub entered: u64,
    /// Releases started: critical sections left.
    pub left: u64,
    /// The error that stopped the worker, if any.
    pub error: Option<RdmaError>,
}

impl Worker {
    pub(crate) fn new(lock: LockRef, slot: usize, seed: u64, work: Workload, own: Loc) -> Worker {
        Worker {
            lock,
            slot,
            rng: seed,
            work,
            own,
            phase: Phase::Idle,
            writer: false,
            started: 0,
            entered: 0,
            left: 0,
            error: None,
        }
    }

    /// SplitMix64.
    fn next_random(&mut self) -> u64 {
        self.rng = self.rng.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.rng;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn fail(&mut self, e: RdmaError) -> Step {
        self.error = Some(e);
        self.phase = Phase::Finished;
        Step::Done
    }
}

impl Process for Worker {
    fn resume(&mut self, reply: Reply) -> Step {
        let mut reply = reply;
        loop {
            if let Reply::Failed(e) = reply {
                return self.fail(e);
            }
            match &mut self.phase {
                Phase::Idle => {
                    if self.work.limit.is_some_and(|n| self.started >= n) {
                        self.phase = Phase::Finished;
                        return Step::Done;
                    }
                    let draw = self.next_random() % 1_000_000;
                    self.writer =
                        !self.lock.shared_readers() || draw < u64::from(self.work.writer_ppm);
                    self.started += 1;
                    self.phase = Phase::Acquiring(self.lock.acquire(self.slot, self.writer));
                    reply = Reply::Start;
                }
                Phase::Acquiring(routine) => match routine.resume(reply) {
                    Ok(Yield::Op(op)) => return Step::Op(op),
                    Ok(Yield::Done(())) => {
                        self.entered += 1;
                        self.phase = Phase::Critical {
                            left: self.work.cs_ops,
                        };
                        reply = Reply::Start;
                    }
                    Err(e) => return self.fail(e),
                },
                Phase::Critical { left } if *left > 0 => {
                    let first = *left == self.work.cs_ops;
                    *left -= 1;
                    let op = if first {
                        Op::Store {
                            loc: self.own,
                            value: self.entered,
                        }
                    } else {
                        Op::Load { loc: self.own }
                    };
                    return Step::Op(op);
                }
                Phase::Critical { .. } => {
                    self.left += 1;
                    self.phase = Phase::Releasing(self.lock.release(self.slot, self.writer));
                    reply = Reply::Start;
                }
                Phase::Releasing(routine) => match routine.resume(reply) {
                    Ok(Yield::Op(op)) => return Step::Op(op),
                    Ok(Yield::Done(())) => {
                        self.phase = Phase::Thinking {
                            left: self.work.think_ops,
                        };
                        reply = Reply::Start;
                    }
                    Err(e) => return self.fail(e),
                },
                Phase::Thinking { left } if *left > 0 => {
                    *left -= 1;
                    return Step::Op(Op::Load { loc: self.own });
                }
                Phase::Thinking { .. } => {
                    self.phase = Phase::Idle;
                    reply = Reply::Start;
                }
                Phase::Finished => return Step::Done,
            }
        }
    }
}
