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
//!
//! [`LogConfig`]: super::LogConfig

/// Words a snapshot bank keeps for the membership from the snapshot's point on: room for
/// four configurations (in effect at the point, and decided after it).
pub const SNAPSHOT_WORDS: usize = 9;

/// A set of replicas (bit r: replica r).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Members(pub u64);

impl Members {
    /// Replicas 0 to n − 1.
    pub fn all(n: u16) -> Members {
        assert!(n <= 64, "at most 64 replicas");
        Members(if n == 64 { u64::MAX } else { (1 << n) - 1 })
    }

    /// The replicas in `ids`.
    pub fn of(ids: &[u16]) -> Members {
        Members(ids.iter().fold(0, |m, &r| {
            assert!(r < 64, "at most 64 replicas");
            m | 1 << r
        }))
    }

    /// Whether replica `r` is a member.
    pub fn contains(self, r: u16) -> bool {
        r < 64 && self.0 >> r & 1 == 1
    }

    /// How many members.
    pub fn len(self) -> usize {
        self.0.count_ones() as usize
    }

    /// No member at all.
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// Members needed for a majority.
    pub fn majority(self) -> usize {
        self.len() / 2 + 1
    }

    /// The members, in order.
    pub fn iter(self) -> impl Iterator<Item = u16> {
        let mut rest = self.0;
        std::iter::from_fn(move || {
            // The lowest member left, then clear its bit.
            let r = (rest != 0).then(|| rest.trailing_zeros() as u16)?;
            rest &= rest - 1;
            Some(r)
        })
    }

    /// Whether `next` differs from `self` by exactly one replica (lemma (one change at a
    /// time)) and keeps a member.
    pub fn one_change_to(self, next: Members) -> bool {
        (self.0 ^ next.0).count_ones() == 1 && !next.is_empty()
    }

    /// A configuration entry's bytes for a log of `replicas`: the mask, little endian,
    /// in one byte per 8 replicas (so that logs of small values can hold it).
    pub fn to_entry(self, replicas: u16) -> Vec<u8> {
        assert!(
            self.0 & !Members::all(replicas).0 == 0,
            "members of the log's replicas"
        );
        self.0.to_le_bytes()[..Members::entry_len(replicas)].to_vec()
    }

    /// The length of a configuration entry of a log of `replicas`.
    pub fn entry_len(replicas: u16) -> usize {
        usize::from(replicas).div_ceil(8).max(1)
    }

    /// The members a configuration entry names (`None`: longer than 8 bytes).
    pub fn from_entry(bytes: &[u8]) -> Option<Members> {
        let mut mask = [0u8; 8];
        mask.get_mut(..bytes.len())?.copy_from_slice(bytes);
        Some(Members(u64::from_le_bytes(mask)))
    }
}

/// The members of every slot from some slot on: the configuration in effect there and
/// those decided to take effect later.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Membership {
    /// `(first slot, members)`, first slots increasing; the first covers every slot
    /// this replica still runs.
    changes: Vec<(u64, Members)>,
}

impl Membership {
    /// `initial` from slot 0 on.
    pub fn new(initial: Members) -> Membership {
        assert!(!initial.is_empty(), "a configuration has a member");
        Membership {
            changes: vec![(0, initial)],
        }
    }

    /// The members of `slot`.
    pub fn at(&self, slot: u64) -> Members {
        self.changes
            .iter()
            .rev()
            .find(|&&(from, _)| from <= slot)
            .map_or(self.changes[0].1, |&(_, m)| m)
    }

    /// The last configuration decided (in effect or not yet).
    pub fn latest(&self) -> Members {
        self.changes.last().expect("a configuration").1
    }

    /// Whether a decided configuration takes effect after `slot`.
    pub fn pending_after(&self, slot: u64) -> bool {
        self.changes.last().expect("a configuration").0 > slot
    }

    /// A configuration entry naming `members` was applied in `slot`: it takes effect at
    /// `slot + alpha` (lemma (α-window)).
    pub fn decided(&mut self, slot: u64, members: Members, alpha: u64) {
        let from = slot + alpha;
        let last = self.changes.last().expect("a configuration").0;
        assert!(
            from > last,
            "configurations take effect in the order decided"
        );
        self.changes.push((from, members));
        assert_eq!(self.at(from), members, "in effect from its slot on");
    }

    /// Forgets configurations no slot from `slot` on uses.
    pub fn forget_before(&mut self, slot: u64) {
        while self.changes.len() > 1 && self.changes[1].0 <= slot {
            self.changes.remove(0);
        }
    }

    /// The configurations from `slot` on, as words (for a snapshot: a replica that copies
    /// it resumes at `slot` without the entries below): count, then `(first slot,
    /// members)` pairs.
    pub fn to_words(&self, slot: u64) -> Vec<u64> {
        let mut copy = self.clone();
        copy.forget_before(slot);
        let mut words = vec![copy.changes.len() as u64];
        for (from, m) in copy.changes {
            words.extend([from, m.0]);
        }
        words
    }

    /// A snapshot as the log keeps it: the membership from `point` on (its words), then
    /// the service's bytes. `None` if the membership needs more than [`SNAPSHOT_WORDS`].
    /// The reference the tests hold a bank's content to (a replica writes it through
    /// [`super::snapshot::BankImage`]).
    #[cfg(test)]
    pub fn wrap_snapshot(&self, point: u64, service: &[u8]) -> Option<Vec<u8>> {
        let words = self.to_words(point);
        if words.len() > SNAPSHOT_WORDS {
            return None;
        }
        let mut out: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
        out.extend_from_slice(service);
        Some(out)
    }

    /// The membership and the service's bytes of a bank's content (the membership's words,
    /// then the service's bytes); `None` if it is not one.
    pub fn unwrap_snapshot(bytes: &[u8]) -> Option<(Membership, &[u8])> {
        let word = |i: usize| {
            let b = bytes.get(8 * i..8 * i + 8)?;
            Some(u64::from_le_bytes(b.try_into().expect("8 bytes")))
        };
        let n = usize::try_from(word(0)?)
            .ok()
            .filter(|&n| n <= SNAPSHOT_WORDS)?;
        let words: Vec<u64> = (0..1 + 2 * n).map(word).collect::<Option<_>>()?;
        let (membership, rest) = Membership::from_words(&words)?;
        assert!(rest.is_empty(), "exactly the membership's words");
        Some((membership, &bytes[8 * (1 + 2 * n)..]))
    }

    /// The membership [`Membership::to_words`] wrote, and the words after it; `None` if
    /// they are not such words.
    pub fn from_words(words: &[u64]) -> Option<(Membership, &[u64])> {
        let (&n, rest) = words.split_first()?;
        let n = usize::try_from(n)
            .ok()
            .filter(|&n| n >= 1 && 2 * n <= rest.len())?;
        let changes: Vec<(u64, Members)> = rest[..2 * n]
            .chunks(2)
            .map(|p| (p[0], Members(p[1])))
            .collect();
        let ordered = changes.windows(2).all(|w| w[0].0 < w[1].0);
        let nonempty = changes.iter().all(|(_, m)| !m.is_empty());
        (ordered && nonempty).then_some((Membership { changes }, &rest[2 * n..]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_change_takes_effect_alpha_slots_after_its_entry() {
        let mut m = Membership::new(Members::all(3));
        assert_eq!(m.at(100), Members::all(3));
        m.decided(10, Members::all(4), 4);
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
    fn words_round_trip_and_bad_words_are_refused() {
        let mut m = Membership::new(Members::all(3));
        m.decided(10, Members::all(4), 4);
        m.decided(30, Members::of(&[1, 2, 3]), 4);
        let mut words = m.to_words(20);
        words.push(99);
        let (back, rest) = Membership::from_words(&words).expect("words");
        assert_eq!(rest, &[99]);
        assert_eq!(back.at(20), Members::all(4));
        assert_eq!(back.at(34), Members::of(&[1, 2, 3]));
        assert_eq!(Membership::from_words(&[2, 0, 7]), None, "truncated");
        assert_eq!(Membership::from_words(&[1, 0, 0]), None, "no member");
        assert_eq!(
            Members::from_entry(&Members::of(&[2]).to_entry(3)),
            Some(Members::of(&[2]))
        );
        assert_eq!(
            Members::of(&[2]).to_entry(3).len(),
            1,
            "a byte for 3 replicas"
        );
        assert_eq!(Members::of(&[9]).to_entry(10).len(), 2);
        assert_eq!(Members::from_entry(&[0; 9]), None);
        let snapshot = m.wrap_snapshot(20, b"state").expect("fits");
        let (back, service) = Membership::unwrap_snapshot(&snapshot).expect("a snapshot");
        assert_eq!(
            (back.at(34), service),
            (Members::of(&[1, 2, 3]), &b"state"[..])
        );
        assert_eq!(
            Membership::unwrap_snapshot(&snapshot[..20]),
            None,
            "truncated"
        );
    }
}
