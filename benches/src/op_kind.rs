//! What the benchmarks count a leader's operations as: one classification for every count.

use velos_rdma::Op;

/// The kind of an engine step, as the benchmarks count it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum OpKind {
    /// A put of any form (value and stamps): one work request.
    Put,
    /// A remote atomic (prepare and accept CASes): one work request.
    Atomic,
    /// A get (heartbeat and catch-up reads): one work request.
    Get,
    /// A completion test (`Test`, `TestLoad`).
    Test,
    /// A CPU load (local acceptor words).
    Load,
    /// A clock reading.
    Now,
    /// A pause.
    Pause,
    /// Anything else.
    Other,
}

impl OpKind {
    /// The kind of `op`.
    pub(crate) fn of(op: &Op) -> OpKind {
        match op {
            Op::Put { .. } | Op::PutInline { .. } | Op::PutWords { .. } => OpKind::Put,
            Op::Atomic { .. } => OpKind::Atomic,
            Op::Get { .. } => OpKind::Get,
            Op::Test { .. } | Op::TestLoad { .. } => OpKind::Test,
            Op::Load { .. } => OpKind::Load,
            Op::Now => OpKind::Now,
            Op::Pause { .. } => OpKind::Pause,
            _ => OpKind::Other,
        }
    }
}
