//! Library instructions of a litmus thread: the real library routines, run in place.

use velos_rdma::sync::sv::Bcast;
use velos_rdma::sync::{Routine, Yield, nlock, sc, slock, wlock};
use velos_rdma::{RdmaError, Reply};

/// A library routine a litmus instruction runs (`bcast`, `acq`, `rel`, `sc_*`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum LibCall {
    /// `bcast X {..}`.
    Bcast(Bcast),
    /// `acq` of a wlock or slock.
    WlockAcquire(wlock::Acquire),
    /// `rel` of a wlock.
    WlockRelease(wlock::Release),
    /// `rel` of an slock.
    SlockRelease(slock::Release),
    /// `acq` of an nlock.
    NlockAcquire(nlock::Acquire),
    /// `rel` of an nlock.
    NlockRelease(nlock::Release),
    /// `sc_write`, `sc_read`, `sc_cas`, `sc_faa`.
    Sc(sc::ScOp),
}

fn unit<T>(y: Yield<()>) -> Yield<Option<T>> {
    match y {
        Yield::Op(op) => Yield::Op(op),
        Yield::Done(()) => Yield::Done(None),
    }
}

impl LibCall {
    /// Resumes the routine; it finishes with a value for the SC library's reads and RMWs.
    pub fn resume(&mut self, reply: Reply) -> Result<Yield<Option<u64>>, RdmaError> {
        Ok(match self {
            LibCall::Bcast(r) => unit(r.resume(reply)?),
            LibCall::WlockAcquire(r) => unit(r.resume(reply)?),
            LibCall::WlockRelease(r) => unit(r.resume(reply)?),
            LibCall::SlockRelease(r) => unit(r.resume(reply)?),
            LibCall::NlockAcquire(r) => unit(r.resume(reply)?),
            LibCall::NlockRelease(r) => unit(r.resume(reply)?),
            LibCall::Sc(r) => match r.resume(reply)? {
                Yield::Op(op) => Yield::Op(op),
                Yield::Done(v) => Yield::Done(Some(v)),
            },
        })
    }
}
