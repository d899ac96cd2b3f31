//! Routines: the pieces processes are built from. A lock acquire, a broadcast, an SC read
//! are each a small state machine that issues operations until it finishes with a value.

use crate::error::RdmaError;
use crate::op::{Op, Reply};
use std::fmt::Debug;
use std::hash::Hash;

/// What a routine wants next.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Yield<T> {
    /// Execute this operation and resume me with its reply.
    Op(Op),
    /// I have finished with this value.
    Done(T),
}

/// A resumable piece of a process. Like [`crate::Process`], it is `Clone + Hash + Eq` so
/// that the explorer can deduplicate states of processes that run it.
///
/// Protocol: the first call gets [`Reply::Start`]; each later call gets the reply to the
/// operation the previous call yielded. A [`Reply::Failed`] ends the routine with that error.
pub trait Routine: Clone + Eq + Hash + Debug + Send + 'static {
    /// The value the routine finishes with.
    type Output;
    /// Resume with the reply to the previous operation.
    fn resume(&mut self, reply: Reply) -> Result<Yield<Self::Output>, RdmaError>;
}

/// The value of a `Load` or CPU `Cas` reply, or the error of a failed one.
pub fn value_of(reply: Reply) -> Result<u64, RdmaError> {
    match reply {
        Reply::Value(v) => Ok(v),
        Reply::Failed(e) => Err(e),
        other => panic!("routine protocol: expected a value, got {other:?}"),
    }
}

/// Checks a reply that carries no value.
pub fn done_of(reply: Reply) -> Result<(), RdmaError> {
    match reply {
        Reply::Done | Reply::Start => Ok(()),
        Reply::Failed(e) => Err(e),
        Reply::Value(_) | Reply::Words(_) => Ok(()),
    }
}

/// The first operation of a routine that has just been made: it always issues one.
pub(crate) fn first_op<R: Routine>(routine: &mut R) -> Result<Op, RdmaError> {
    match routine.resume(Reply::Start)? {
        Yield::Op(op) => Ok(op),
        Yield::Done(_) => panic!("routine protocol: {routine:?} finished before its first step"),
    }
}
