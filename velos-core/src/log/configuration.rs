//! A configuration: the members ([`Members`], a set of replicas) and the incarnation of
//! each replica it names.
//!
//! Rule (no amnesia): a replica's acceptor is its memory, and a process that starts in a
//! replica's place has blank memory. So a configuration names every member with an
//! *incarnation* — the number of the process behind that memory —, a process that starts
//! blank in a replica's place gets an incarnation never named before for it, and a word
//! of a slot counts (is sent a CAS, counts in a majority, in a catch-up, in a lease) only
//! if the slot's configuration names the replica at the incarnation the reader is
//! connected to now. A blank word then never stands in for a promise or an accept an
//! earlier incarnation made (`paper-notes/velos.md`, "Replacing a replica").

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
}

impl std::fmt::Display for Members {
    /// The members' ids, in order: `{0, 2}` (`{}` for none).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("{")?;
        for (i, r) in self.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{r}")?;
        }
        f.write_str("}")
    }
}

/// The number of a process behind a replica's memory: 0 for the processes a log starts
/// with, larger for each process that starts blank in a replica's place.
pub type Incarnation = u64;

/// The members and the incarnation of every replica, as a configuration entry names them.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Configuration {
    /// Who votes.
    pub members: Members,
    /// Per replica of the log: the incarnation this configuration names it at (a
    /// non-member's: the last one named, so that a later configuration knows it).
    pub named: Vec<Incarnation>,
}

impl Configuration {
    /// `members` of a log of `replicas`, every replica at incarnation 0.
    pub fn first(members: Members, replicas: u16) -> Configuration {
        Configuration {
            members,
            named: vec![0; usize::from(replicas)],
        }
    }

    /// Whether this configuration names replica `r` as a member at `incarnation`.
    pub fn names(&self, r: u16, incarnation: Incarnation) -> bool {
        self.members.contains(r) && self.named[usize::from(r)] == incarnation
    }

    /// The members named at the incarnations of `current` (indexed by replica): those
    /// whose words count for a reader connected to `current`.
    pub fn voters(&self, current: &[Incarnation]) -> Members {
        let voters = Members(
            self.members
                .iter()
                .filter(|&r| self.named[usize::from(r)] == current[usize::from(r)])
                .fold(0, |m, r| m | 1 << r),
        );
        assert!(
            voters.0 & !self.members.0 == 0,
            "rule (no amnesia): voters are members"
        );
        voters
    }

    /// The entry's bytes: the member mask, little endian, one byte per 8 replicas (so that
    /// logs of small values can hold it), then — only once some replica's incarnation is
    /// not 0 — every replica's incarnation in LEB128.
    pub fn to_entry(&self) -> Vec<u8> {
        let replicas = self.replicas();
        assert!(
            self.members.0 & !Members::all(replicas).0 == 0,
            "members of the log's replicas"
        );
        let mut out = self.members.0.to_le_bytes()[..Configuration::mask_len(replicas)].to_vec();
        if self.named.iter().any(|&i| i != 0) {
            for &i in &self.named {
                crate::leb128::push(&mut out, i);
            }
        }
        out
    }

    /// The configuration an entry of a log of `replicas` names; `None` if it is not one.
    pub fn from_entry(bytes: &[u8], replicas: u16) -> Option<Configuration> {
        let (mask, mut rest) = bytes.split_at_checked(Configuration::mask_len(replicas))?;
        let mut word = [0u8; 8];
        word[..mask.len()].copy_from_slice(mask);
        let members = Members(u64::from_le_bytes(word));
        if members.is_empty() || members.0 & !Members::all(replicas).0 != 0 {
            return None;
        }
        let mut named = vec![0; usize::from(replicas)];
        if !rest.is_empty() {
            for n in &mut named {
                (*n, rest) = crate::leb128::take(rest, 10)?;
            }
        }
        rest.is_empty().then_some(Configuration { members, named })
    }

    /// The length of an entry's member mask for a log of `replicas`.
    pub fn mask_len(replicas: u16) -> usize {
        usize::from(replicas).div_ceil(8).max(1)
    }

    /// The replicas of the log.
    pub fn replicas(&self) -> u16 {
        u16::try_from(self.named.len()).expect("at most 64 replicas")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_round_trip_and_stay_one_byte_until_an_incarnation_moves() {
        let mut c = Configuration::first(Members::of(&[0, 2]), 3);
        assert_eq!(c.to_entry(), vec![0b101], "the mask alone");
        assert_eq!(Configuration::from_entry(&c.to_entry(), 3), Some(c.clone()));
        c.named[1] = 300;
        let entry = c.to_entry();
        assert_eq!(entry.len(), 1 + 1 + 2 + 1, "mask, then 0, 300, 0");
        assert_eq!(Configuration::from_entry(&entry, 3), Some(c.clone()));
        assert_eq!(Configuration::from_entry(&entry[..4], 3), None, "truncated");
        assert_eq!(Configuration::from_entry(&[0], 3), None, "no member");
        assert_eq!(
            Configuration::from_entry(&[0b1000], 3),
            None,
            "not a replica"
        );
        assert_eq!(
            Configuration::from_entry(&[1, 0, 0, 0, 0], 3),
            None,
            "bytes left over"
        );
        assert_eq!(
            Configuration::first(Members::all(10), 10).to_entry().len(),
            2
        );
    }

    #[test]
    fn members_print_as_their_ids() {
        assert_eq!(Members::of(&[0, 2]).to_string(), "{0, 2}");
        assert_eq!(Members::of(&[63]).to_string(), "{63}");
        assert_eq!(Members::default().to_string(), "{}");
    }

    #[test]
    fn a_member_votes_only_at_the_incarnation_it_is_named_at() {
        let mut c = Configuration::first(Members::all(3), 3);
        assert_eq!(c.voters(&[0, 0, 0]), Members::all(3));
        assert_eq!(
            c.voters(&[0, 0, 1]),
            Members::of(&[0, 1]),
            "replica 2 restarted blank: its words do not count here"
        );
        c.named[2] = 1;
        assert!(c.names(2, 1) && !c.names(2, 0));
        assert_eq!(c.voters(&[0, 0, 1]), Members::all(3));
    }
}
