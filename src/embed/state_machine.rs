//! The service a cluster replicates.

/// Where a command sits in the log: the slot that decided its batch, and its place in
/// the batch. Positions grow with the order of application.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Position {
    /// The log slot.
    pub slot: u64,
    /// The command's index in the slot's batch (from 0).
    pub index: u32,
}

/// Why a snapshot could not be restored.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("the snapshot cannot be restored: {0}")]
pub struct RestoreError(pub String);

/// The service's state, replicated: every replica applies the same commands in the same
/// order. Batches are unpacked first and a leader's no-ops skipped, so `apply` sees the
/// commands proposed, one at a time.
pub trait StateMachine: Send + 'static {
    /// What applying a command answers: the proposer's receipt carries the leader's
    /// ([`CommitInfo::response`](super::CommitInfo::response)); `()` for a service whose
    /// commands answer nothing.
    type Response: Clone + Send + 'static;

    /// Applies the command at `position` and answers it; positions come in log order,
    /// without gaps in the slots that carry commands. Every replica computes the same
    /// answer (it must depend on the state and the command only); the leader's goes back
    /// to the proposer.
    fn apply(&mut self, position: Position, command: &[u8]) -> Self::Response;

    /// The state as bytes, enough for [`StateMachine::restore`] to rebuild it (slot
    /// recycling will hand a snapshot to a replica that fell behind the log's ring).
    /// Called on the replica's thread between its turns, every
    /// [`Config::snapshot_every_slots`](super::Config): while it runs the replica neither
    /// decides nor writes its heartbeat, so a snapshot that takes longer than the log's
    /// failure timeout makes the peers suspect it (copying 64 MiB takes tens of
    /// milliseconds; the in-process default timeout is 50 ms). The bytes returned are
    /// kept, not copied.
    fn snapshot(&self) -> Vec<u8>;

    /// Replaces the state with the one `snapshot` describes; a snapshot that does not
    /// decode is an error, and the state is then left as it was.
    fn restore(&mut self, snapshot: &[u8]) -> Result<(), RestoreError>;
}
