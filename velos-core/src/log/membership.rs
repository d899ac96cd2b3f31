//! Membership: which of the log's replicas vote. Every replica of the [`LogConfig`] is
//! provisioned (its memory registered, its queue pairs connected) and follows the log; the
//! *members* are those whose acceptors count in majorities and which may lead. A
//! configuration entry decided in slot s changes the members from slot s + α on, α being
//! the leader's pipeline.
//!
//! Lemma (α-window): whoever runs consensus in slot n knows the members of n. A leader
//! opens slot n only when n < prefix + α (its first unapplied slot plus the pipeline), so
//! every configuration entry that takes effect at or below n (decided in s ≤ n − α < prefix)
//! was applied by it; a follower learns or repairs only its next unapplied slot, so the same
//! holds. Lemma (one change at a time): a change adds or removes exactly one replica, and
//! none is proposed while another is decided but not yet in effect at the leader's prefix,
//! so the majorities of consecutive configurations intersect (|old ∩ new| covers a
//! majority of either) and no two configurations are ever in effect in one slot.
//! Rule (no amnesia, [`super::configuration`]): a configuration names each member at an
//! incarnation, and a member counts in a slot only at the incarnation that slot's
//! configuration names — so replacing a replica's process is two changes: the old
//! incarnation removed, the new one added.
//!
//! [`LogConfig`]: super::LogConfig

pub use super::configuration::Members;
use super::configuration::{Configuration, Incarnation};

/// Words a snapshot bank keeps for the membership of a log of `replicas` from the
/// snapshot's point on: room for four configurations (in effect at the point, and decided
/// after it), each with every replica's incarnation.
pub fn snapshot_words(replicas: u16) -> usize {
    1 + 4 * (2 + usize::from(replicas))
}

/// What a configuration entry applied did ([`Membership::decided`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decided {
    /// It takes effect `alpha` slots after its own.
    Taken,
    /// It names the last configuration again: nothing changes.
    Same,
    /// Rule (void change): not one change from the last configuration: nothing changes.
    Void,
}

/// The flag of a membership's first word when its configurations carry incarnations.
const WITH_INCARNATIONS: u64 = 1 << 32;

/// The members of every slot from some slot on: the configuration in effect there and
/// those decided to take effect later; and the incarnation of every replica's process as
/// this replica knows it now (rule (no amnesia)).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Membership {
    /// `(first slot, configuration, its voters for me)`, first slots increasing; the first
    /// covers every slot this replica still runs. The voters — the members named at the
    /// incarnation I am connected to — are kept with each configuration (recomputed when
    /// a connection changes), so the hot path reads them as it reads the members.
    changes: Vec<(u64, Configuration, Members)>,
    /// Per replica: the incarnation of the process this replica is connected to (its own:
    /// itself).
    current: Vec<Incarnation>,
    /// The replicas a configuration I knew named as members at the incarnation I am
    /// connected to (rule (retire): such a replica, once no configuration names it, was
    /// removed — a spare never was a member).
    voted: Members,
}

impl Membership {
    /// `initial` of a log of `replicas` from slot 0 on, every replica at incarnation 0.
    pub fn new(initial: Members, replicas: u16) -> Membership {
        assert!(!initial.is_empty(), "a configuration has a member");
        Membership {
            changes: vec![(0, Configuration::first(initial, replicas), initial)],
            current: vec![0; usize::from(replicas)],
            voted: initial,
        }
    }

    fn change_at(&self, slot: u64) -> &(u64, Configuration, Members) {
        self.changes
            .iter()
            .rev()
            .find(|&&(from, ..)| from <= slot)
            .unwrap_or(&self.changes[0])
    }

    /// The members of `slot` (a majority is of them).
    pub fn at(&self, slot: u64) -> Members {
        self.change_at(slot).1.members
    }

    /// The members of `slot` whose words count for me: named at the incarnation I am
    /// connected to (rule (no amnesia)).
    pub fn voters(&self, slot: u64) -> Members {
        self.change_at(slot).2
    }

    /// Every configuration's voters computed again (a connection changed).
    fn count_voters(&mut self) {
        for (_, c, voters) in &mut self.changes {
            *voters = c.voters(&self.current);
            self.voted.0 |= voters.0;
        }
    }

    /// Rule (retire): the replicas that, at the incarnation I am connected to, were members
    /// and that no configuration of the slots from `slot` on names — removed by a change,
    /// not replaced (a replacement's old incarnation is not the one I am connected to).
    /// Such a process is to be cut off, and comes back only as a new one (the join path).
    /// One pass over the configurations (none on a stable membership: the heartbeat asks
    /// every period).
    pub fn removed_from(&self, slot: u64) -> Members {
        let named_from = self
            .changes
            .iter()
            .enumerate()
            .filter(|&(i, _)| self.changes.get(i + 1).is_none_or(|next| next.0 > slot))
            .fold(0, |m, (_, (_, c, _))| m | c.members.0);
        let latest = self.latest_configuration();
        let candidates = self.voted.0 & !named_from;
        let removed = Members(
            Members(candidates)
                .iter()
                .filter(|&r| latest.named[usize::from(r)] == self.current[usize::from(r)])
                .fold(0, |m, r| m | 1 << r),
        );
        assert!(
            removed.0 & !self.voted.0 == 0,
            "rule (retire): only a member is removed"
        );
        removed
    }

    /// Rule (retire): whether replica `r`'s process, a member once, is removed by the last
    /// configuration decided ([`Membership::removed_from`] the slot it takes effect).
    pub fn was_removed(&self, r: u16) -> bool {
        let last = self.changes.last().expect("a configuration").0;
        self.removed_from(last).contains(r)
    }

    /// The last configuration decided (in effect or not yet).
    pub fn latest(&self) -> Members {
        self.latest_configuration().members
    }

    /// The last configuration decided, with its incarnations.
    pub fn latest_configuration(&self) -> &Configuration {
        &self.changes.last().expect("a configuration").1
    }

    /// Whether a decided configuration takes effect after `slot`.
    pub fn pending_after(&self, slot: u64) -> bool {
        self.changes.last().expect("a configuration").0 > slot
    }

    /// The incarnation of replica `r`'s process as I know it now.
    pub fn incarnation(&self, r: u16) -> Incarnation {
        self.current[usize::from(r)]
    }

    /// Every replica's incarnation as I know it now.
    pub fn incarnations(&self) -> &[Incarnation] {
        &self.current
    }

    /// I am connected to `incarnation` of replica `r` from now on (a process started blank
    /// in its place, or — for myself — I am that process).
    pub fn connected(&mut self, r: u16, incarnation: Incarnation) {
        assert!(
            incarnation >= self.current[usize::from(r)],
            "rule (no amnesia): incarnations only grow"
        );
        self.current[usize::from(r)] = incarnation;
        // A new process voted in nothing yet.
        self.voted.0 &= !(1 << r);
        self.count_voters();
    }

    /// The configuration a change to `members` names: the members kept at the
    /// incarnations the last configuration names them at, those added at the incarnation
    /// I am connected to.
    pub fn proposal(&self, members: Members) -> Configuration {
        let latest = self.latest_configuration();
        let mut named = latest.named.clone();
        for r in members.iter().filter(|&r| !latest.members.contains(r)) {
            named[usize::from(r)] = self.current[usize::from(r)];
        }
        Configuration { members, named }
    }

    /// A configuration entry naming `configuration` was applied in `slot`: it takes effect
    /// at `slot + alpha` (lemma (α-window)).
    ///
    /// An entry that changes nothing (the same members at the same incarnations as the
    /// last one: a change proposed again after an attempt whose outcome its proposer did
    /// not learn, decided twice) is kept out, so that it takes no room in snapshots.
    ///
    /// Rule (void change): an entry whose members are not one replica added to or removed
    /// from the last configuration's is void — it changes nothing. A leader checks its
    /// proposal against the last configuration *it* applied; one that had not applied an
    /// entry another leader decided in a later slot could propose a change from the
    /// configuration before it, and two such entries applied one after the other would be
    /// two changes at once, whose majorities need not intersect (lemma (one change at a
    /// time)). Every replica applies the same entries in the same order from the same
    /// configurations, so all void the same ones.
    pub fn decided(&mut self, slot: u64, configuration: Configuration, alpha: u64) -> Decided {
        let latest = self.latest_configuration();
        if configuration == *latest {
            return Decided::Same;
        }
        if !latest.members.one_change_to(configuration.members) {
            return Decided::Void;
        }
        let from = slot + alpha;
        let last = self.changes.last().expect("a configuration").0;
        assert!(
            from > last,
            "configurations take effect in the order decided"
        );
        assert_eq!(
            configuration.named.len(),
            self.current.len(),
            "a configuration of this log"
        );
        let voters = configuration.voters(&self.current);
        self.voted.0 |= voters.0;
        self.changes.push((from, configuration, voters));
        assert_eq!(self.at(from), self.latest(), "in effect from its slot on");
        Decided::Taken
    }

    /// Takes the configurations of `copied` (a snapshot's), keeping what I am connected to.
    pub fn adopt(&mut self, copied: Membership) {
        assert_eq!(copied.current.len(), self.current.len(), "the same log");
        self.changes = copied.changes;
        self.count_voters();
    }

    /// Forgets configurations no slot from `slot` on uses.
    pub fn forget_before(&mut self, slot: u64) {
        while self.changes.len() > 1 && self.changes[1].0 <= slot {
            self.changes.remove(0);
        }
    }

    /// The configurations from `slot` on, as words (for a snapshot: a replica that copies
    /// it resumes at `slot` without the entries below): the count, then `(first slot,
    /// members)` pairs — and every replica's incarnation after each pair, with the flag
    /// bit 32 of the count set, once some incarnation is not 0.
    pub fn to_words(&self, slot: u64) -> Vec<u64> {
        let mut copy = self.clone();
        copy.forget_before(slot);
        let with = copy
            .changes
            .iter()
            .any(|(_, c, _)| c.named.iter().any(|&i| i != 0));
        let mut words = vec![copy.changes.len() as u64 | if with { WITH_INCARNATIONS } else { 0 }];
        for (from, c, _) in copy.changes {
            words.extend([from, c.members.0]);
            if with {
                words.extend(&c.named);
            }
        }
        words
    }

    /// A snapshot as the log keeps it: the membership from `point` on (its words), then
    /// the service's bytes. `None` if the membership needs more than [`snapshot_words`].
    /// The reference the tests hold a bank's content to (a replica writes it through
    /// [`super::snapshot::BankImage`]), and what a replica's disk keeps
    /// ([`super::Replica::wrap_snapshot`]).
    pub fn wrap_snapshot(&self, point: u64, service: &[u8]) -> Option<Vec<u8>> {
        let words = self.to_words(point);
        if words.len() > snapshot_words(self.current.len() as u16) {
            return None;
        }
        let mut out: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
        out.extend_from_slice(service);
        Some(out)
    }

    /// The membership of a log of `replicas` and the service's bytes of a bank's content
    /// (the membership's words, then the service's bytes); `None` if it is not one. What I
    /// am connected to is not in a snapshot: the membership's is every replica at 0, to be
    /// [`Membership::adopt`]ed.
    pub fn unwrap_snapshot(bytes: &[u8], replicas: u16) -> Option<(Membership, &[u8])> {
        let word = |i: usize| {
            let b = bytes.get(8 * i..8 * i + 8)?;
            Some(u64::from_le_bytes(b.try_into().expect("8 bytes")))
        };
        let head = word(0)?;
        let n = usize::try_from(head & !WITH_INCARNATIONS).ok()?;
        let per = if head & WITH_INCARNATIONS != 0 {
            2 + usize::from(replicas)
        } else {
            2
        };
        if 1 + n * per > snapshot_words(replicas) {
            return None;
        }
        let words: Vec<u64> = (0..1 + n * per).map(word).collect::<Option<_>>()?;
        let (membership, rest) = Membership::from_words(&words, replicas)?;
        assert!(rest.is_empty(), "exactly the membership's words");
        Some((membership, &bytes[8 * words.len()..]))
    }

    /// The membership of a log of `replicas` that [`Membership::to_words`] wrote, and the
    /// words after it; `None` if they are not such words.
    pub fn from_words(words: &[u64], replicas: u16) -> Option<(Membership, &[u64])> {
        let (&head, rest) = words.split_first()?;
        let with = head & WITH_INCARNATIONS != 0;
        let per = if with { 2 + usize::from(replicas) } else { 2 };
        let n = usize::try_from(head & !WITH_INCARNATIONS)
            .ok()
            .filter(|&n| n >= 1 && n.checked_mul(per).is_some_and(|w| w <= rest.len()))?;
        let changes: Vec<(u64, Configuration)> = rest[..n * per]
            .chunks(per)
            .map(|p| {
                let mut c = Configuration::first(Members(p[1]), replicas);
                if with {
                    c.named.copy_from_slice(&p[2..]);
                }
                (p[0], c)
            })
            .collect();
        let ordered = changes.windows(2).all(|w| w[0].0 < w[1].0);
        let valid = changes
            .iter()
            .all(|(_, c)| !c.members.is_empty() && c.members.0 & !Members::all(replicas).0 == 0);
        if !(ordered && valid) {
            return None;
        }
        let current = vec![0; usize::from(replicas)];
        let changes: Vec<(u64, Configuration, Members)> = changes
            .into_iter()
            .map(|(from, c)| {
                let voters = c.voters(&current);
                (from, c, voters)
            })
            .collect();
        let voted = Members(changes.iter().fold(0, |m, (_, _, v)| m | v.0));
        Some((
            Membership {
                changes,
                current,
                voted,
            },
            &rest[n * per..],
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn first(members: Members, replicas: u16) -> Configuration {
        Configuration::first(members, replicas)
    }

    #[test]
    fn a_change_takes_effect_alpha_slots_after_its_entry() {
        let mut m = Membership::new(Members::all(3), 4);
        assert_eq!(m.at(100), Members::all(3));
        m.decided(10, first(Members::all(4), 4), 4);
        assert_eq!(m.at(13), Members::all(3));
        assert_eq!(m.at(14), Members::all(4));
        assert!(m.pending_after(13) && !m.pending_after(14));
        assert_eq!(m.latest(), Members::all(4));
        m.forget_before(20);
        assert_eq!(
            m.at(0),
            Members::all(4),
            "only the configuration in effect is left"
        );
    }

    #[test]
    fn one_change_at_a_time() {
        let three = Members::all(3);
        assert!(three.one_change_to(Members::all(4)));
        assert!(three.one_change_to(Members::of(&[1, 2])));
        assert!(!three.one_change_to(Members::of(&[1, 2, 3])), "two changes");
        assert!(!three.one_change_to(three), "no change");
        assert!(
            !Members::of(&[0]).one_change_to(Members(0)),
            "no member left"
        );
        assert_eq!(Members::of(&[1, 2, 3]).majority(), 2);
        assert_eq!(Members::all(4).majority(), 3);
    }

    #[test]
    fn a_replaced_process_votes_only_once_a_configuration_names_its_incarnation() {
        let mut m = Membership::new(Members::all(3), 3);
        m.connected(2, 1); // replica 2's process started again, blank
        assert_eq!(m.at(5), Members::all(3), "a majority is still of three");
        assert_eq!(m.voters(5), Members::of(&[0, 1]), "rule (no amnesia)");
        let removed = m.proposal(Members::of(&[0, 1]));
        assert_eq!(
            removed.named,
            vec![0, 0, 0],
            "the last incarnation named is kept"
        );
        m.decided(5, removed, 4);
        let added = m.proposal(Members::all(3));
        assert_eq!(
            added.named,
            vec![0, 0, 1],
            "added at the incarnation connected"
        );
        m.decided(12, added, 4);
        assert_eq!(m.voters(8), Members::of(&[0, 1]));
        assert_eq!(m.voters(16), Members::all(3));
        assert_eq!(
            m.voters(3),
            Members::of(&[0, 1]),
            "the old words never count"
        );
    }

    #[test]
    fn words_round_trip_and_bad_words_are_refused() {
        let mut m = Membership::new(Members::all(3), 4);
        m.decided(10, first(Members::all(4), 4), 4);
        m.decided(30, first(Members::of(&[1, 2, 3]), 4), 4);
        let mut words = m.to_words(20);
        assert_eq!(words.len(), 5, "no incarnation yet: pairs only");
        words.push(99);
        let (back, rest) = Membership::from_words(&words, 4).expect("words");
        assert_eq!(rest, &[99]);
        assert_eq!(back.at(20), Members::all(4));
        assert_eq!(back.at(34), Members::of(&[1, 2, 3]));
        assert_eq!(Membership::from_words(&[2, 0, 7], 4), None, "truncated");
        assert_eq!(Membership::from_words(&[1, 0, 0], 4), None, "no member");
        assert_eq!(
            Membership::from_words(&[1, 0, 1 << 5], 4),
            None,
            "not a replica"
        );
        let snapshot = m.wrap_snapshot(20, b"state").expect("fits");
        let (back, service) = Membership::unwrap_snapshot(&snapshot, 4).expect("a snapshot");
        assert_eq!(
            (back.at(34), service),
            (Members::of(&[1, 2, 3]), &b"state"[..])
        );
        assert_eq!(
            Membership::unwrap_snapshot(&snapshot[..20], 4),
            None,
            "truncated"
        );
        m.connected(0, 7);
        m.decided(40, m.proposal(Members::all(4)), 4);
        let unchanged = m.latest_configuration().clone();
        assert_eq!(m.decided(50, unchanged, 4), Decided::Same);
        assert!(
            !m.pending_after(44),
            "an entry that changes nothing is kept out"
        );
        let words = m.to_words(35);
        assert_eq!(words.len(), 1 + 2 * 6, "every incarnation after each pair");
        assert!(words.len() <= snapshot_words(4));
        let (back, _) = Membership::from_words(&words, 4).expect("words");
        assert_eq!(back.latest_configuration().named, vec![7, 0, 0, 0]);
        assert_eq!(
            back.incarnations(),
            &[0, 0, 0, 0],
            "a snapshot holds no connection"
        );
    }

    /// Rule (void change): an entry that is not one change from the last configuration —
    /// two replicas added, one swapped for another, the same members at other incarnations
    /// — changes nothing; the next valid one is taken.
    #[test]
    fn an_entry_two_changes_away_is_void() {
        let mut m = Membership::new(Members::of(&[0, 1, 2]), 5);
        for bad in [
            Members::of(&[0, 1, 2, 3, 4]),
            Members::of(&[0, 1, 3]),
            Members::of(&[0]),
        ] {
            assert_eq!(m.decided(10, first(bad, 5), 4), Decided::Void, "{bad}");
            assert_eq!(m.at(20), Members::of(&[0, 1, 2]), "{bad}: nothing changed");
            assert!(!m.pending_after(10));
        }
        let mut other = m.latest_configuration().clone();
        other.named[1] = 3;
        assert_eq!(
            m.decided(11, other, 4),
            Decided::Void,
            "another incarnation"
        );
        let one = first(Members::of(&[0, 1, 2, 3]), 5);
        assert_eq!(m.decided(12, one, 4), Decided::Taken);
        assert_eq!(m.at(16), Members::of(&[0, 1, 2, 3]));
    }
}
