//! Proposal numbers: unique per proposer (proposer i of N uses i+1, i+1+N, i+1+2N, ...) so
//! that two proposers never share one (Algorithm 5).

/// A proposer's identity: its index among the cluster's proposers, from 0.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ProposerId(pub u16);

impl ProposerId {
    /// The value-field encoding of "this proposer's value buffer" (0 is ⊥).
    pub fn value_tag(self) -> u16 {
        self.0 + 1
    }

    /// The proposer a value field names, if any.
    pub fn from_value_tag(value: u16) -> Option<ProposerId> {
        value.checked_sub(1).map(ProposerId)
    }
}

/// The numbering of one cluster's proposals.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Numbering {
    /// How many proposers there are.
    pub proposers: u16,
}

impl Numbering {
    /// The proposer that owns proposal number `n` (> 0).
    pub fn owner(self, n: u64) -> ProposerId {
        assert!(n > 0, "proposal 0 means none");
        ProposerId(((n - 1) % u64::from(self.proposers)) as u16)
    }

    /// The smallest proposal number of `me` strictly greater than `above`.
    pub fn next_above(self, me: ProposerId, above: u64) -> u64 {
        assert!(
            me.0 < self.proposers,
            "proposer {} of {}",
            me.0,
            self.proposers
        );
        let n = u64::from(self.proposers);
        let first = u64::from(me.0) + 1;
        let next = if above < first {
            first
        } else {
            first + ((above - first) / n + 1) * n
        };
        // Postconditions: ours, and the least such above `above`.
        debug_assert_eq!(self.owner(next), me);
        debug_assert!(next > above && next <= above + n);
        next
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_unique_per_proposer_and_increase() {
        let numbering = Numbering { proposers: 3 };
        assert_eq!(numbering.next_above(ProposerId(0), 0), 1);
        assert_eq!(numbering.next_above(ProposerId(1), 0), 2);
        assert_eq!(numbering.next_above(ProposerId(2), 0), 3);
        assert_eq!(numbering.next_above(ProposerId(0), 1), 4);
        assert_eq!(numbering.next_above(ProposerId(0), 3), 4);
        assert_eq!(numbering.next_above(ProposerId(2), 3), 6);
        for above in 0..100 {
            for p in 0..3 {
                let n = numbering.next_above(ProposerId(p), above);
                assert_eq!(numbering.owner(n), ProposerId(p));
                assert!(n > above);
            }
        }
    }
}
