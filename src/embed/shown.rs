//! What the handle sees of each replica ([`Shown`]), written by the replica's driver (and
//! by the handle when it crashes one): its status, the leader it trusts, whether it takes
//! proposals, how far it applied. The handle's answers — [`Role`], the leader, whether a
//! command is admitted — are read from it here.

use super::error::Error;
use super::watch::LeaderWatch;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU16, AtomicU64, Ordering};

/// Replica states in [`Shown::status`].
pub(crate) const UP: u8 = 0;
pub(crate) const CRASHED: u8 = 1;
pub(crate) const STOPPED: u8 = 2;

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
    /// The voters of the last configuration that took effect here (a bit per replica; 0:
    /// none yet, the log's initial members).
    pub(crate) members: AtomicU64,
    /// Bumped when `leader`, `leading` or `status` changes (one watch per cluster).
    pub(crate) watch: Arc<LeaderWatch>,
}

impl Shown {
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
        self.status.store(status, Ordering::SeqCst);
        if self.leading.swap(false, Ordering::SeqCst) {
            self.watch.leading_changed(me, false, now);
        }
        self.watch.bump();
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
}
