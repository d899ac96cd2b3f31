//! What can go wrong when proposing, and why a cluster does not start.

use std::time::Duration;
use velos_core::log::membership::Members;

/// Why a command was not committed, or what is known of it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The replica asked does not lead; `leader` is the one it trusts. The command was
    /// not taken.
    #[error("replica {replica} does not lead: replica {leader} does")]
    NotLeader {
        /// The replica asked.
        replica: u16,
        /// The leader as that replica sees it.
        leader: u16,
    },
    /// A wait for durability on a cluster without it ([`Config::durable`]).
    ///
    /// [`Config::durable`]: super::Config::durable
    #[error("durability is off: nothing is written to disk (Config::durable)")]
    DurabilityOff,
    /// Too many of the members' disks stopped persisting (full, or failing) for a
    /// majority to hold the entry: the log goes on deciding, without durability.
    #[error(
        "the disks of replicas {replicas:?} stopped persisting ({reason}): no majority can make entries durable"
    )]
    DiskStopped {
        /// The replicas whose disks stopped.
        replicas: Vec<u16>,
        /// The first one's reason.
        reason: String,
    },
    /// The command does not fit in a log entry, even alone.
    #[error("a command of {len} bytes is larger than the {max} an entry holds")]
    CommandTooLarge {
        /// The command's size.
        len: usize,
        /// The largest command.
        max: usize,
    },
    /// No replica with that id.
    #[error("no replica {replica} (the cluster has {replicas})")]
    NoSuchReplica {
        /// The id asked for.
        replica: u16,
        /// Replicas in the cluster.
        replicas: u16,
    },
    /// The replica crashed or stopped before it took the command: it was not proposed.
    #[error("replica {replica} is down: the command was not proposed")]
    Unavailable {
        /// The replica.
        replica: u16,
    },
    /// No live replica is known to lead — a failover is under way (the old leader is
    /// down, the next one not chosen yet): the command was not proposed. Retry once
    /// [`Cluster::wait_for_leader`](super::Cluster::wait_for_leader) returns.
    #[error("no replica leads now (a failover is under way): the command was not proposed")]
    NoLeader,
    /// [`Session::resubmit`](super::Session::resubmit) before the session submitted
    /// anything.
    #[error("the session has no command to submit again")]
    NothingToResubmit,
    /// Every replica is down: nobody can take the command.
    #[error("every replica is down")]
    NoReplicaUp,
    /// Only a crashed or removed replica is replaced ([`super::Cluster::replace`]): this
    /// one runs.
    #[error("replica {replica} is running: only a crashed or removed replica is replaced")]
    NotCrashed {
        /// The replica.
        replica: u16,
    },
    /// Every running replica votes already: no spare to add
    /// ([`super::Cluster::add_replica`]; a crashed one is added by
    /// [`super::Cluster::replace`]).
    #[error("no running replica outside the configuration to add (replace a crashed one instead)")]
    NoSpare,
    /// The cluster is shutting down; the command was not proposed.
    #[error("the cluster is shutting down")]
    ShuttingDown,
    /// Nothing was heard of the command for `after`: it may still commit.
    #[error("no outcome after {after:?}: the command may still commit")]
    TimedOut {
        /// How long the wait lasted.
        after: Duration,
    },
    /// The command was proposed, then its leader was deposed or crashed before it was
    /// decided: a later leader may still decide it (if an acceptor accepted it) or not.
    #[error("the leader lost its role before deciding the command: outcome unknown")]
    OutcomeUnknown,
    /// The command was committed in `slot` (it took effect), but the replica that proposed
    /// it did not apply that slot itself — it stopped first, or copied a snapshot past it
    /// — so the state machine's response is not known.
    #[error("committed in slot {slot}, but its replica did not apply it: the response is lost")]
    ResponseLost {
        /// The slot that holds the command.
        slot: u64,
    },
    /// A session command the replicas did not apply: its session was evicted from their
    /// table (more than [`Config::max_sessions`](super::Config) sessions were used since
    /// it last was), so they cannot tell whether an earlier copy of it applied. Open a new
    /// session; whether the command took effect must be read from the state.
    #[error("session {session} expired: its command was not applied (it may have been before)")]
    SessionExpired {
        /// The session's id.
        session: u64,
    },
    /// Every slot of the log's ring is in use: slots are recycled only behind a snapshot
    /// that a majority holds (every [`Config::snapshot_every_slots`](super::Config)).
    /// Normally a passing state — the replicas are still writing the snapshots that free
    /// slots — which [`Cluster::submit`](super::Cluster::submit) waits out. (A snapshot
    /// refused for its size never frees any: that is [`Error::SnapshotTooLarge`].) A
    /// snapshot refused for another reason is named here when the replica that answers
    /// had its last one refused (and in a `tracing` warning when it was).
    #[error(
        "the log is full: no snapshot a majority holds lets its slots be reused{}",
        refused_suffix(snapshot_refused)
    )]
    LogFull {
        /// Why the answering replica's last snapshot was refused, if it was (the
        /// [`SnapshotError`](crate::core::log::SnapshotError), as text).
        snapshot_refused: Option<String>,
    },
    /// A replica's snapshot — the state machine's, with the client sessions' table — is
    /// larger than the log's snapshot banks, so the log refused it and cannot reuse the
    /// slots it would have covered: the ring would fill. Commands fail with this at once
    /// from the refusal on (reads too once the ring is full), until a replica's snapshot
    /// fits again. Raise [`LogConfig::max_snapshot_bytes`](super::LogConfig) to at least
    /// `bytes` (each replica registers two banks of it and `⌈replicas / 2⌉` incoming ones),
    /// or shrink the state; the session table takes 24 bytes per session kept
    /// ([`Config::max_sessions`](super::Config)) and 4 more.
    #[error(
        "replica {replica}'s snapshot of {bytes} bytes ({state_bytes} of state, {sessions} \
         client sessions) is larger than LogConfig::max_snapshot_bytes ({max}): raise \
         max_snapshot_bytes to at least {bytes} (or lower Config::max_sessions, 24 bytes \
         each); the log cannot reuse its slots without snapshots"
    )]
    SnapshotTooLarge {
        /// The replica whose snapshot was refused.
        replica: u16,
        /// The snapshot's size: the state's bytes, 24 per session, 4 for their count.
        bytes: usize,
        /// The state machine's part ([`StateMachine::snapshot`](super::StateMachine)).
        state_bytes: usize,
        /// Client sessions in the table.
        sessions: usize,
        /// [`LogConfig::max_snapshot_bytes`](super::LogConfig).
        max: usize,
    },
    /// A slot used up its proposal numbers in every epoch of the overflow fallback: the
    /// log cannot grow past it.
    #[error("slot {slot} ran out of proposal numbers in every epoch")]
    Exhausted {
        /// The slot.
        slot: u64,
    },
    /// A membership change the log refused: not one replica added or removed, or a
    /// replica the cluster does not have.
    #[error("membership change refused: {0}")]
    BadMembership(String),
    /// Another membership change is under way (proposed, or decided and not in effect
    /// yet). [`Cluster::change_members`](super::Cluster::change_members) waits for it.
    #[error("another membership change is not in effect yet")]
    ChangePending,
}

impl Error {
    /// Whether the command certainly was not proposed, so proposing it again cannot apply
    /// it twice.
    pub fn not_proposed(&self) -> bool {
        matches!(
            self,
            Error::NotLeader { .. }
                | Error::CommandTooLarge { .. }
                | Error::NoSuchReplica { .. }
                | Error::Unavailable { .. }
                | Error::NoReplicaUp
                | Error::NoLeader
                | Error::ShuttingDown
                | Error::LogFull { .. }
                | Error::SnapshotTooLarge { .. }
                | Error::BadMembership(_)
                | Error::ChangePending
                | Error::Exhausted { .. }
        )
    }
}

/// Why a cluster did not start.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum StartError {
    /// The configuration is unusable, and why.
    #[error("invalid configuration: {0}")]
    InvalidConfig(String),
    /// The backend could not be set up.
    #[error("backend: {0}")]
    Backend(String),
    /// The replicas' directories could not be read, or do not hold a log to start from
    /// ([`Cluster::recover`](super::Cluster::recover)), and why.
    #[error("recovery from disk: {0}")]
    Recovery(String),
}

/// The end of [`Error::LogFull`]'s message.
fn refused_suffix(refused: &Option<String>) -> String {
    refused.as_ref().map_or_else(String::new, |why| {
        format!("; this replica's last snapshot was refused: {why}")
    })
}

/// `why` (the engine's reason for refusing a membership change) with every member set it
/// names as a bit mask (`0x5`) written as the replicas' ids (`{0, 2}`).
pub(crate) fn member_ids(why: &str) -> String {
    let mut out = String::with_capacity(why.len());
    let mut rest = why;
    while let Some(at) = rest.find("0x") {
        out.push_str(&rest[..at]);
        let digits = rest[at + 2..]
            .find(|c: char| !c.is_ascii_hexdigit())
            .unwrap_or(rest.len() - at - 2);
        let hex = &rest[at + 2..at + 2 + digits];
        match u64::from_str_radix(hex, 16) {
            Ok(mask) => out.push_str(&Members(mask).to_string()),
            Err(_) => out.push_str(&rest[at..at + 2 + digits]),
        }
        rest = &rest[at + 2 + digits..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn member_masks_in_a_reason_become_ids() {
        assert_eq!(
            member_ids("from 0x7 to 0xa: one replica added or removed at a time, one left"),
            "from {0, 1, 2} to {1, 3}: one replica added or removed at a time, one left"
        );
        assert_eq!(member_ids("no set here"), "no set here");
        assert_eq!(
            member_ids("a lone 0x"),
            "a lone 0x",
            "no digits: left alone"
        );
    }
}
