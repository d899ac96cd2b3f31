//! The log as a bounded ring of slots. Log instance i (an entry's index, growing forever)
//! lives at ring position i mod `slots`, and its acceptor words carry the instance tag
//! ⌊i / slots⌋ mod 2^tag_bits, the *lap*. A position is reused only after its previous
//! instance is *retired*: a majority of replicas hold snapshots that include it, so nobody
//! ever needs its acceptor words or value buffers again (a replica that still does has
//! fallen off the ring and copies a snapshot instead; see `replica/transfer.rs`).
//!
//! Nobody resets a word for its next lap — no CPU store ever races a remote CAS (Fig. 6a of
//! the rdma-rmw paper). A word whose tag is an earlier lap's *reads as* the initial state
//! ⟨tag, 0, 0, ⊥⟩ of the current instance, and the first CAS of the new instance expects
//! the old word exactly and writes a word of the new tag. (An acceptor that missed a lap —
//! its CAS failed, or it was slow — still holds a word two or more laps old; epoch words
//! above 0 usually hold lap 0's zero word for ever. All of them read as ⊥.)
//!
//! Lemma (recycling): a word of an earlier lap at the position of instance i stands for
//! ⟨tag(i), 0, 0, ⊥⟩. Proof: instance i is opened only after i − slots is retired, and
//! with it every earlier instance of the position, so no correct participant reads or
//! proposes them any more; a late CAS of a stale proposer of one of them expects a word of
//! its old tag and can only succeed on one, where it is harmless (that instance is
//! decided, and every proposal in it carries the decided value); once i's first CAS landed
//! at an acceptor, every stale CAS there fails. So before i's first CAS the word holds no
//! state of instance i: ⊥.
//!
//! Lemma (overtaken): a proposer or learner of instance i that meets a word of a later lap
//! stops: i was retired, so it is decided and a majority's snapshots include it. Writing
//! from such a word would destroy a live instance's state, so no CAS is ever built on it.
//!
//! Tags wrap: a word is taken for an earlier lap when its tag lies up to half the tag space
//! (128 laps with 8 bits) below the instance's, for a later lap when it lies less than half
//! above. A word that missed every CAS of its position for half the tag space's laps and
//! then answers again could be misread as a later lap's (the slot stops and the leader
//! copies a snapshot: safe), and a proposer stale by as many laps would misread a later
//! word as ⊥; crash-stop replicas never answer again, and a replica paused that long finds
//! itself behind by its heartbeat readings long before its words are consulted.

use crate::word::{AcceptorState, Lap, WordLayout, laps_ahead};

/// Where log instances live: positions and tags.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Ring {
    /// Positions.
    pub slots: u32,
    /// Bits of the instance tag in the acceptor word (0: no ring, the log ends after
    /// `slots` instances).
    pub tag_bits: u8,
}

impl Ring {
    /// The ring of `slots` positions whose words carry `layout`'s tag.
    pub fn new(slots: u32, layout: WordLayout) -> Ring {
        assert!(slots > 0, "a ring has positions");
        Ring {
            slots,
            tag_bits: layout.tag_bits,
        }
    }

    /// Whether positions are reused (a tag of at least 2 bits tells the previous lap from
    /// the next one).
    pub fn recycles(self) -> bool {
        self.tag_bits >= 2
    }

    /// The ring position of `instance`.
    pub fn position(self, instance: u64) -> u32 {
        assert!(
            self.recycles() || instance < u64::from(self.slots),
            "instance {instance} of a log of {} slots without a ring",
            self.slots
        );
        (instance % u64::from(self.slots)) as u32
    }

    /// The lap of `instance`, as its words' tag.
    pub fn tag(self, instance: u64) -> u16 {
        let lap = instance / u64::from(self.slots);
        if self.tag_bits == 0 {
            0
        } else {
            (lap & ((1u64 << self.tag_bits) - 1)) as u16
        }
    }

    /// Whether `instance` is in the ring's first lap (its buffers were never used before).
    pub fn first_lap(self, instance: u64) -> bool {
        instance < u64::from(self.slots)
    }

    /// Whether `instance` reuses its position (a previous lap's word is ⊥ for it).
    pub fn recycled(self, instance: u64) -> bool {
        self.recycles() && !self.first_lap(instance)
    }

    /// How `word` (at `instance`'s position) relates to `instance`.
    pub fn classify(self, layout: WordLayout, instance: u64, word: u64) -> Lap {
        layout.lap(self.tag(instance), self.recycled(instance), word)
    }

    /// Whether `tag` (a value stamp's) names a later lap than `instance`'s: less than half
    /// the tag space above it, as for words ([`WordLayout::lap`]).
    pub fn later_tag(self, instance: u64, tag: u16) -> bool {
        if !self.recycles() {
            return false;
        }
        let ahead = laps_ahead(self.tag_bits, self.tag(instance), tag);
        ahead != 0 && ahead < (1u64 << self.tag_bits) / 2
    }

    /// The state `word` stands for at `instance`: `None` if the instance was retired.
    pub fn state(self, layout: WordLayout, instance: u64, word: u64) -> Option<AcceptorState> {
        layout.state_at(self.tag(instance), self.recycled(instance), word)
    }
}

/// The retirement bound given every replica's snapshot point: every instance below it is
/// in the snapshots of a majority (the majority-th largest point).
pub fn retired(points: &[u64]) -> u64 {
    retired_of(points.len(), points.iter().copied())
}

/// [`retired`] of the `count` points `points` yields, gathered straight into the buffer
/// they are sorted in.
pub fn retired_of(count: usize, points: impl IntoIterator<Item = u64>) -> u64 {
    assert!(count > 0, "some replica");
    assert!(count <= 64, "a log has at most 64 replicas");
    // On the stack (the leader asks at every turn), and no more of it zeroed than a
    // small configuration needs.
    let mut small = [0u64; 8];
    let mut large;
    let sorted: &mut [u64] = if count <= small.len() {
        &mut small[..count]
    } else {
        large = [0u64; 64];
        &mut large[..count]
    };
    let mut n = 0;
    for p in points {
        sorted[n] = p;
        n += 1;
    }
    assert_eq!(n, count, "as many points as announced");
    sorted.sort_unstable_by(|a, b| b.cmp(a));
    let bound = sorted[count / 2];
    assert!(
        sorted.iter().filter(|&&p| p >= bound).count() > count / 2,
        "a majority's snapshots include every instance below the bound"
    );
    bound
}

impl Ring {
    /// The first instance that may not be opened yet, given the retirement bound: its
    /// position's previous instance is not retired.
    pub fn room(self, retired: u64) -> u64 {
        if self.recycles() {
            retired + u64::from(self.slots)
        } else {
            u64::from(self.slots)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const L: WordLayout = WordLayout::VELOS;

    fn word(tag: u16, accepted: u64) -> u64 {
        L.encode(AcceptorState {
            tag,
            min_proposal: accepted,
            accepted_proposal: accepted,
            accepted_value: u16::from(accepted > 0),
            previous_decision: 0,
        })
        .unwrap()
    }

    #[test]
    fn instances_map_to_positions_and_laps() {
        let r = Ring::new(4, L);
        assert!(r.recycles());
        assert_eq!((r.position(9), r.tag(9)), (1, 2));
        assert_eq!(r.tag(4 * 256 + 3), 0, "tags wrap");
        assert!(r.first_lap(3) && !r.first_lap(4));
    }

    #[test]
    fn previous_lap_reads_as_bottom_and_later_laps_as_retired() {
        let r = Ring::new(4, L);
        assert_eq!(
            r.state(L, 5, word(0, 7)),
            Some(AcceptorState::initial(1)),
            "lap 0's word is ⊥ for lap 1"
        );
        assert_eq!(
            r.classify(L, 5, word(1, 7)),
            Lap::Current(L.decode(word(1, 7)))
        );
        assert_eq!(r.classify(L, 5, word(2, 7)), Lap::Later);
        assert!(r.later_tag(5, 2) && !r.later_tag(5, 1) && !r.later_tag(5, 0));
        assert!(r.later_tag(255 * 4, 0), "stamp tags wrap as word tags do");
        assert_eq!(
            r.classify(L, 1, word(255, 7)),
            Lap::Later,
            "no lap before 0"
        );
        assert_eq!(
            r.classify(L, 4 * 256, word(255, 7)),
            Lap::Previous,
            "wrapped"
        );
        assert_eq!(
            r.classify(L, 9, word(0, 7)),
            Lap::Previous,
            "two laps old: ⊥"
        );
        assert_eq!(r.classify(L, 9, 0), Lap::Previous, "an untouched word");
        assert_eq!(r.classify(L, 9, word(129, 7)), Lap::Later, "127 laps ahead");
        assert_eq!(
            r.classify(L, 9, word(131, 7)),
            Lap::Previous,
            "127 laps behind"
        );
    }

    #[test]
    fn a_majority_of_snapshot_points_retires_instances() {
        assert_eq!(retired(&[10, 4, 7]), 7);
        assert_eq!(retired(&[0, 0, 9]), 0, "one replica is no majority");
        assert_eq!(retired(&[5, 5, 5, 1, 1]), 5);
        let r = Ring::new(4, L);
        assert_eq!(r.room(7), 11);
        assert_eq!(
            Ring::new(4, WordLayout::PAPER).room(7),
            4,
            "no ring: the log ends"
        );
    }

    #[test]
    fn a_log_without_tags_never_recycles() {
        let r = Ring::new(4, WordLayout::PAPER);
        assert!(!r.recycles());
        assert_eq!(
            r.classify(WordLayout::PAPER, 3, 0),
            Lap::Current(AcceptorState::default())
        );
    }
}
