//! The backend trait for backends that run each process on a real thread.

use crate::ids::NodeId;
use crate::op::{Op, Reply};
use crate::process::{Batch, Process};

/// One thread's connection to a fabric: it executes operations in program order.
/// Remote operations are posted and return at once; `Wait`, `Poll`, `GlobalFence`,
/// `Mfence` and CPU `Cas` block as their semantics say.
///
/// The emulator does not implement this trait: it is the scheduler of its processes and
/// interleaves their steps itself. Everything written as a [`Process`] runs on both.
pub trait Endpoint {
    /// The node this thread runs on.
    fn node(&self) -> NodeId;
    /// Execute one operation.
    fn execute(&mut self, op: &Op) -> Reply;
}

/// Runs `process` to completion on `endpoint`, a batch at a time
/// ([`Process::resume_batch`]); returns how many operations it issued.
pub fn drive<P: Process, E: Endpoint + ?Sized>(process: &mut P, endpoint: &mut E) -> u64 {
    let mut reply = Reply::Start;
    let mut ops = 0u64;
    let mut batch = Vec::new();
    loop {
        let end = process.resume_batch(reply, &mut batch);
        assert!(
            end == Batch::Done || !batch.is_empty(),
            "a batch to resume after has an operation to reply to"
        );
        reply = Reply::Done;
        for op in batch.drain(..) {
            ops += 1;
            reply = endpoint.execute(&op);
        }
        if end == Batch::Done {
            return ops;
        }
    }
}
