//! Typed operating errors of the programming model.

use crate::ids::{Loc, NodeId, WorkId};
use thiserror::Error;

/// Why an operation failed. Operating errors are values: a backend never panics for one.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Error)]
#[non_exhaustive]
pub enum RdmaError {
    /// The remote node crashed; operations towards it fail (or, if so configured, never
    /// complete).
    #[error("remote node {node} crashed")]
    RemoteCrashed {
        /// The crashed node.
        node: NodeId,
    },
    /// The queue pair towards `node` is in the error state; every operation on it fails.
    #[error("queue pair towards {node} is in error")]
    QueuePairError {
        /// The target node of the queue pair.
        node: NodeId,
    },
    /// A remote operation was refused by the target's memory protection (for example a
    /// write into a region whose key this queue pair does not hold).
    #[error("remote access to {loc} refused")]
    RemoteAccess {
        /// The word the operation targeted.
        loc: Loc,
    },
    /// A remote atomic or word access whose address is not 8-byte aligned.
    #[error("misaligned access to {loc}: word operations need 8-byte alignment")]
    MisalignedAtomic {
        /// The offending location.
        loc: Loc,
    },
    /// An access beyond the node's registered region.
    #[error("access to {loc} is outside the registered region")]
    OutOfBounds {
        /// The offending location.
        loc: Loc,
    },
    /// A CPU operation on a word of another node.
    #[error("CPU access to {loc}, which is not on the thread's node {node}")]
    NotLocal {
        /// The offending location.
        loc: Loc,
        /// The node of the issuing thread.
        node: NodeId,
    },
    /// An operation names a node that the fabric does not have.
    #[error("{node} is not a node of the fabric")]
    UnknownNode {
        /// The node named.
        node: NodeId,
    },
    /// A `poll` with no unacknowledged operation on its queue pair: in the model it would
    /// block forever; a real backend reports it instead of hanging.
    #[error("poll towards {node} with no unacknowledged operation on that queue pair")]
    NothingToPoll {
        /// Target node of the queue pair.
        node: NodeId,
    },
    /// The backend cannot perform this operation (yet), or not on a fabric of this size.
    #[error("{operation} is not supported by {backend}")]
    Unsupported {
        /// The operation.
        operation: &'static str,
        /// The backend, and why.
        backend: &'static str,
    },
    /// A `wait_any` with an empty set of work ids: it would block forever.
    #[error("wait_any for no work id")]
    NothingToWaitFor,
    /// A `wait` for which one of the awaited operations failed; the first failure.
    #[error("an operation with work id {} failed: {cause}", work_id.0)]
    WorkFailed {
        /// The work id waited for.
        work_id: WorkId,
        /// The failure of the first failed operation.
        cause: Box<RdmaError>,
    },
}

impl RdmaError {
    /// The refusal of a multi-word `operation` (`GetWords`, `LoadWords`) of no words.
    pub fn no_words(operation: &'static str) -> RdmaError {
        RdmaError::Unsupported {
            operation,
            backend: "a copy of no words",
        }
    }
}
