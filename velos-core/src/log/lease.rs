//! Leader leases, so that a leader answers reads from its own state without a round of the
//! log, and still never returns a stale value.
//!
//! Acceptors take no part in one-sided Paxos, so they cannot promise anything; replicas
//! promise through their heartbeat words instead ([`super::heartbeat`]): every replica
//! publishes the leader it trusts (Ω's) and a version that grows whenever that changes.
//! With leases on (`LogConfig::lease_ns` = D > 0), a replica F *backs* leader L at time t
//! when F = L and L's own word, fenced, has named L since t − D or earlier; or when L saw
//! F trust L at some first observation f ≤ t − D and, with the same version, in a read
//! issued at s > t − D' (D' = 7/8 D). L *holds* its lease at t when a majority backs it.
//!
//! Lemma (one lease at a time): no two leaders hold a lease at the same time t. Proof: their
//! majorities share a replica F backing both. F trusted L continuously over an interval
//! [a, b] reaching from before t − D to after t − D' (first observation f ≤ t − D, same
//! version at s > t − D'), and C over [a', b'] with the same shape; F trusts one leader at a
//! time, so the intervals are disjoint, yet each contains [t − D, t − D']: contradiction.
//! (With F = L itself,
//! C needs L's word to name C, which it does not while L leads; symmetrically for F = C.)
//!
//! Rule (decide-under-lease): a leader opens, fills and adopts slots only while it holds
//! its lease. Rule (lease-barrier): a leader answers a read at t only when it holds the
//! lease and, within its current unbroken period of holding it, has decided `pipeline`
//! consecutive slots with its own proposals (forcing no-ops when idle); the read returns
//! the state at its decided frontier. Lemma (no stale lease read): every entry decided by
//! anyone before the read is below that frontier. Proof: others decide only while holding
//! their lease, so before L's period began (the D/8 margin between the end of one lease
//! and the start of the next covers accepts still in flight, Δ ≤ D/8). L's own decision
//! of slot e with its own proposal shows e was chosen by nobody before; a slot c ≥ e +
//! pipeline chosen by another leader would have had every slot up to c − pipeline, e
//! included, decided before it (a leader's window spans `pipeline` slots past its applied
//! prefix); so everything others chose lies below e, and L knows every decision of its own.
//!
//! The price is failover: a new leader waits D after a majority switched to it, so D is
//! bounded by the failure timeout, and leases are off by default. A replica paused while
//! trusting L keeps showing it, but with the same version only as long as it does.

use super::membership::Members;

/// A read that could not be answered from the leader's lease.
#[derive(Clone, Debug, PartialEq, Eq, Hash, thiserror::Error)]
#[non_exhaustive]
pub enum ReadError {
    /// This replica does not hold a lease now (it does not lead, leases are off, or a
    /// majority has not renewed it recently): read through the log instead.
    #[error("no lease: replica {leader} leads as this replica sees it; read through the log")]
    NoLease {
        /// The leader as this replica sees it.
        leader: u16,
    },
}

/// How a peer was last seen backing me.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct Backing {
    version: u8,
    /// When it was first seen trusting me with this version.
    first: u64,
    /// When the latest read that showed it was issued.
    issued: u64,
}

/// The lease state of one replica's current term.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Lease {
    me: u16,
    lease_ns: u64,
    backing: Vec<Option<Backing>>,
    /// Since when my own word, fenced, names me (this term).
    own_since: Option<u64>,
    /// A majority of whom backs a lease: the members of my next slot
    /// ([`super::membership`]).
    members: Members,
    /// Whose backing counts: those of `members` at the incarnation the configuration names
    /// (rule (no amnesia): a process started blank in a member's place backed nobody).
    voters: Members,
}

impl Lease {
    /// Replica `me` of `replicas`, with leases of `lease_ns` (0: off).
    pub fn new(me: u16, replicas: u16, lease_ns: u64) -> Lease {
        assert!(me < replicas, "replica {me} of {replicas}");
        Lease {
            me,
            lease_ns,
            backing: vec![None; usize::from(replicas)],
            own_since: None,
            members: Members::all(replicas),
            voters: Members::all(replicas),
        }
    }

    /// Whether leases are on.
    pub fn enabled(&self) -> bool {
        self.lease_ns > 0
    }

    fn majority(&self) -> usize {
        self.members.majority()
    }

    /// Whose backing counts from now on. Lemma (one change at a time) of
    /// [`super::membership`]: majorities of consecutive configurations intersect, so a
    /// backer shared by two leases still trusts one leader at a time.
    /// Only `voters` among them back.
    pub fn set_members(&mut self, members: Members, voters: Members) {
        assert!(voters.0 & !members.0 == 0, "voters are members");
        self.members = members;
        self.voters = voters;
    }

    /// Replica `a`'s process was replaced: what its earlier incarnation backed is gone.
    pub fn forget(&mut self, a: u16) {
        self.backing[usize::from(a)] = None;
    }

    /// A new term of mine starts: nobody backs it yet.
    pub fn start_term(&mut self) {
        self.backing.fill(None);
        self.own_since = None;
    }

    /// A heartbeat read of `peer`, issued at `issued_at`, showed it trusting me with trust
    /// `version` (or someone else); its value was loaded at `now`.
    pub fn observed(&mut self, peer: u16, trusts_me: Option<u8>, issued_at: u64, now: u64) {
        assert!(issued_at <= now, "a read is loaded after it is issued");
        let b = &mut self.backing[usize::from(peer)];
        *b = match (trusts_me, *b) {
            (None, _) => None,
            (Some(version), Some(seen)) if seen.version == version => Some(Backing {
                issued: issued_at.max(seen.issued),
                ..seen
            }),
            (Some(version), _) => Some(Backing {
                version,
                first: now,
                issued: issued_at,
            }),
        };
    }

    /// My own word, fenced, names me since before `now`.
    pub fn own_switch(&mut self, now: u64) {
        self.own_since.get_or_insert(now);
    }

    /// Whether `a` backs me at `now`.
    fn backs(&self, a: usize, now: u64) -> bool {
        let d = self.lease_ns;
        if a == usize::from(self.me) {
            return self.own_since.is_some_and(|o| o.saturating_add(d) <= now);
        }
        let valid = d - d / 8;
        self.backing[a].is_some_and(|b| {
            b.first.saturating_add(d) <= now && b.issued.saturating_add(valid) > now
        })
    }

    /// Whether I, leading, hold a lease at `now` (never with leases off).
    pub fn holds(&self, now: u64) -> bool {
        if !self.enabled() {
            return false;
        }
        let backing = (0..self.backing.len())
            .filter(|&a| self.voters.contains(a as u16) && self.backs(a, now))
            .count();
        backing >= self.majority()
    }

    /// Rule (decide-under-lease): whether I may open, fill and adopt slots at `now`.
    pub fn may_decide(&self, now: u64) -> bool {
        !self.enabled() || self.holds(now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_leader_holds_a_lease_d_after_a_majority_backs_it() {
        let mut l = Lease::new(1, 3, 80);
        l.start_term();
        l.own_switch(10);
        l.observed(0, None, 5, 12);
        l.observed(2, Some(3), 15, 30);
        assert!(!l.holds(100), "2 first seen at 30: not before 110");
        l.observed(2, Some(3), 100, 105);
        assert!(l.holds(110) && l.may_decide(110));
        assert!(
            l.holds(169) && !l.holds(170),
            "the read issued at 100 lasts 70"
        );
    }

    #[test]
    fn a_new_version_starts_the_wait_again() {
        let mut l = Lease::new(0, 3, 80);
        l.own_switch(0);
        l.observed(1, Some(1), 0, 5);
        l.observed(1, Some(1), 100, 105);
        assert!(l.holds(105));
        // 1 trusted someone else and came back: a new version, a new wait.
        l.observed(1, Some(3), 110, 115);
        assert!(!l.holds(115) && !l.holds(194));
        l.observed(1, Some(3), 190, 195);
        assert!(l.holds(195));
        l.observed(1, None, 200, 205);
        assert!(!l.holds(205), "1 moved on");
    }

    #[test]
    fn without_leases_a_leader_decides_and_holds_nothing() {
        let l = Lease::new(0, 3, 0);
        assert!(l.may_decide(0));
        assert!(!l.holds(0));
    }
}
