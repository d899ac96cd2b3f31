//! The unit of execution: a sans-IO process that issues one operation at a time.

use crate::op::{Op, Reply};
use std::fmt::Debug;
use std::hash::Hash;

/// What a process wants next.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Step {
    /// Execute this operation and resume me with its reply.
    Op(Op),
    /// I have finished.
    Done,
}

/// How a batch of operations from [`Process::resume_batch`] ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Batch {
    /// Execute the batch in order, then resume me with the reply to its last operation.
    Resume,
    /// Execute the batch in order (it may be empty); then I have finished.
    Done,
}

/// A thread of an RDMA program, written as a state machine: the backend resumes it with
/// the reply to its previous operation and it answers with the next one.
///
/// Every backend runs the same `Process` values unchanged: the emulator interleaves them
/// deterministically (and, because a process is `Clone + Hash + Eq`, the explorer can
/// deduplicate states and find spin loops that never end); the in-process and verbs
/// backends run each on a real thread.
pub trait Process: Clone + Eq + Hash + Debug + Send + 'static {
    /// Resume with the reply to the previous operation ([`Reply::Start`] the first time).
    fn resume(&mut self, reply: Reply) -> Step;

    /// Resume with the reply to the last operation of the previous batch ([`Reply::Start`]
    /// the first time) and append the next operations to `out`, in order: the operations
    /// [`Process::resume`] would have returned one by one, where every one but the last
    /// of a [`Batch::Resume`] batch is one whose reply the process does not read (a post
    /// it reaps later, a store, a pause that ends nothing).
    ///
    /// A caller executes the batch in order and calls nothing else of the process in
    /// between: the process computed the batch without those replies, exactly as it would
    /// have computed each operation after ignoring the reply of the one before, so a
    /// batch is the same sequence of operations and executing it is an execution of the
    /// process's one-at-a-time form (the emulator's). What it saves is one `resume` per
    /// operation whose reply nobody reads. The default returns one operation per batch.
    fn resume_batch(&mut self, reply: Reply, out: &mut Vec<Op>) -> Batch {
        match self.resume(reply) {
            Step::Op(op) => {
                out.push(op);
                Batch::Resume
            }
            Step::Done => Batch::Done,
        }
    }

    /// Whether this process uses rdmatso `poll`. Backends keep completion notifications
    /// for pollers only; rdmawait processes consume theirs through `wait`.
    fn polls(&self) -> bool {
        false
    }

    /// Whether this process may ever post [`Op::Put`](crate::Op::Put), a put whose NIC reads
    /// local memory (inline puts do not). The explorer treats some steps of processes that
    /// never do as invisible; the default is the safe answer.
    fn puts_from_memory(&self) -> bool {
        true
    }

    /// Whether this process may ever use [`Op::Test`](crate::Op::Test),
    /// [`Op::TestLoad`](crate::Op::TestLoad) or [`Op::WaitAny`](crate::Op::WaitAny), whose
    /// replies depend on *when* an operation
    /// completes. The explorer treats a put's completion as invisible only in processes
    /// that never do; the default is the safe answer.
    fn tests_completions(&self) -> bool {
        true
    }

    /// Whether this process may ever issue [`Op::SetWriteAccess`](crate::Op::SetWriteAccess).
    /// A permission change makes puts of other threads fail or succeed, so the emulator's
    /// explorer makes no reduction on a machine with such a process, and the emulator
    /// refuses the operation (with `RdmaError::Unsupported`) from a process that did not
    /// declare it.
    fn changes_write_access(&self) -> bool {
        false
    }
}
