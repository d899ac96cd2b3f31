//! What the handle sees of each replica ([`Shown`]), written by the replica's driver (and
//! by the handle when it crashes one): its status, the leader it trusts, whether it takes
//! proposals, how far it applied. The handle's answers — [`Role`], the leader, whether a
//! command is admitted — are read from it here.

use super::error::Error;
use super::watch::LeaderWatch;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU16, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// Replica states in [`Shown::status`].
pub(crate) const UP: u8 = 0;
pub(crate) const CRASHED: u8 = 1;
pub(crate) const STOPPED: u8 = 2;
pub(crate) const REMOVED: u8 = 3;

/// What a replica is doing, as the handle last saw it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Role {
    /// It leads: it takes proposals.
    Leader,
    /// It follows: proposals there are refused with [`Error::NotLeader`].
    Follower,
    /// It was crashed ([`Cluster::crash`](super::Cluster::crash)).
    Crashed,
    /// It stopped (the cluster is shutting down).
    Stopped,
    /// A configuration change removed it
    /// ([`Cluster::change_members`](super::Cluster::change_members)): it cut itself off
    /// from every peer, as they did from it, and its process ended. It comes back only as
    /// a new process in its place ([`Cluster::replace`](super::Cluster::replace)).
    Removed,
}

/// What the handle sees of a replica, updated by its driver.
#[derive(Debug, Default)]
pub(crate) struct Shown {
    /// The leader this replica trusts (Ω's choice).
    pub(crate) leader: AtomicU16,
    /// Whether it takes proposals: it holds the leader's role and Ω names it.
    pub(crate) leading: AtomicBool,
    pub(crate) status: AtomicU8,
    pub(crate) slots_applied: AtomicU64,
    pub(crate) commands_applied: AtomicU64,
    /// A replacement that does not vote yet or has not caught up (it copies a snapshot
    /// and replays the log): the follower-lag bound does not count it.
    pub(crate) joining: AtomicBool,
    /// The voters of the last configuration that took effect here (a bit per replica; 0:
    /// none yet, the log's initial members).
    pub(crate) members: AtomicU64,
    /// With durability on: every slot below it is on this replica's disk (the log's
    /// numbering, the recovered base included).
    pub(crate) durable: AtomicU64,
    /// With durability on: the `fdatasync`s its disk ran (files and the directory).
    pub(crate) disk_syncs: AtomicU64,
    /// A process that resumed at its disk's newest snapshot: that snapshot's point (0:
    /// it did not).
    pub(crate) resumed: AtomicU64,
    /// Why this replica's disk stopped persisting, if it did.
    pub(crate) disk_stopped: Mutex<Option<velos_store::writer::Stopped>>,
    /// Bumped when `leader`, `leading` or `status` changes (one watch per cluster).
    pub(crate) watch: Arc<LeaderWatch>,
    /// Its last snapshot was refused for its size: `too_large_error` holds why.
    too_large: AtomicBool,
    too_large_error: Mutex<Option<Error>>,
}

impl Shown {
    /// A replica's view, up, that moves `watch`.
    pub(crate) fn watched_by(watch: Arc<LeaderWatch>) -> Shown {
        Shown {
            watch,
            ..Shown::default()
        }
    }

    /// Shows that replica `me` trusts `leader` and whether it takes proposals, at `now`
    /// (its backend's clock); the watch moves if either changed.
    pub(crate) fn show_leadership(&self, me: u16, (leader, leading): (u16, bool), now: u64) {
        let old_leader = self.leader.swap(leader, Ordering::SeqCst);
        let old_leading = self.leading.swap(leading, Ordering::SeqCst);
        if old_leading != leading {
            self.watch.leading_changed(me, leading, Some(now));
        }
        if old_leader != leader || old_leading != leading {
            self.watch.bump();
        }
    }

    /// Shows that replica `me` is in `status` (and takes no proposals), at `now` if the
    /// caller has the backend's clock; the watch moves.
    pub(crate) fn show_status(&self, me: u16, status: u8, now: Option<u64>) {
        if status == UP {
            self.show_too_large(None); // a fresh process: no snapshot refused yet
        }
        self.status.store(status, Ordering::SeqCst);
        if self.leading.swap(false, Ordering::SeqCst) {
            self.watch.leading_changed(me, false, now);
        }
        self.watch.bump();
    }

    /// Shows whether the replica's last snapshot was refused for its size
    /// ([`Error::SnapshotTooLarge`]; `None`: it fit).
    pub(crate) fn show_too_large(&self, refused: Option<Error>) {
        let mut error = self
            .too_large_error
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        self.too_large.store(refused.is_some(), Ordering::SeqCst);
        *error = refused;
    }

    /// Why the replica's last snapshot was refused for its size, if it was.
    fn too_large(&self) -> Option<Error> {
        if !self.too_large.load(Ordering::SeqCst) {
            return None; // every command asks: one load while snapshots fit
        }
        let error = self
            .too_large_error
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        error.clone()
    }

    fn up(&self) -> bool {
        self.status.load(Ordering::SeqCst) == UP
    }
}

/// A replica's role as `shown` says.
pub(crate) fn role_of(shown: &Shown) -> Role {
    match shown.status.load(Ordering::SeqCst) {
        CRASHED => Role::Crashed,
        STOPPED => Role::Stopped,
        REMOVED => Role::Removed,
        _ if shown.leading.load(Ordering::SeqCst) => Role::Leader,
        _ => Role::Follower,
    }
}

/// The first live replica of `shown` that takes proposals, if one does. Not the leader a
/// follower trusts: Ω names a replica before it took the role up (and a crashed one until
/// its heartbeat is missed), and a proposal sent there is refused.
pub(crate) fn leader_of(shown: &[Arc<Shown>]) -> Option<u16> {
    let at = shown
        .iter()
        .position(|s| s.up() && s.leading.load(Ordering::SeqCst))?;
    Some(u16::try_from(at).expect("at most 64 replicas"))
}

/// Whether `replica` (as `shown`) takes a command of `len` bytes (at most `max`).
pub(crate) fn admit(shown: &Shown, replica: u16, len: usize, max: usize) -> Result<(), Error> {
    if len > max {
        return Err(Error::CommandTooLarge { len, max });
    }
    if !shown.up() {
        return Err(Error::Unavailable { replica });
    }
    Ok(())
}

/// The first refusal of a snapshot for its size among the live replicas of `shown`: a
/// command would only help fill a log that cannot recycle its slots.
pub(crate) fn too_large(shown: &[Arc<Shown>]) -> Result<(), Error> {
    let refused = shown.iter().filter(|s| s.up()).find_map(|s| s.too_large());
    refused.map_or(Ok(()), Err)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cluster(n: usize) -> Vec<Arc<Shown>> {
        (0..n).map(|_| Arc::new(Shown::default())).collect()
    }

    #[test]
    fn the_leader_is_a_live_replica_that_takes_proposals_never_one_merely_trusted() {
        let shown = cluster(3);
        // Replicas 1 and 2 trust 0, which has not taken the role up yet.
        shown[1].show_leadership(1, (0, false), 0);
        shown[2].show_leadership(2, (0, false), 0);
        assert_eq!(leader_of(&shown), None, "trusted is not leading");
        shown[0].show_leadership(0, (0, true), 0);
        assert_eq!(leader_of(&shown), Some(0));
        assert_eq!(role_of(&shown[0]), Role::Leader);
        // Crashed: its view is stale, the others still trust it.
        shown[0].show_status(0, CRASHED, None);
        assert_eq!(leader_of(&shown), None);
        assert_eq!(role_of(&shown[0]), Role::Crashed);
        shown[2].show_leadership(2, (2, true), 0);
        assert_eq!(leader_of(&shown), Some(2));
    }

    #[test]
    fn a_snapshot_refused_for_its_size_refuses_commands_while_its_replica_lives() {
        let shown = cluster(3);
        assert_eq!(too_large(&shown), Ok(()));
        let refused = Error::SnapshotTooLarge {
            replica: 1,
            bytes: 9,
            state_bytes: 5,
            sessions: 0,
            max: 8,
        };
        shown[1].show_too_large(Some(refused.clone()));
        assert_eq!(too_large(&shown), Err(refused));
        shown[1].show_status(1, CRASHED, None);
        assert_eq!(too_large(&shown), Ok(()), "a crashed replica's is gone");
        shown[1].show_status(1, UP, None);
        assert_eq!(too_large(&shown), Ok(()), "its replacement has none yet");
    }
}
