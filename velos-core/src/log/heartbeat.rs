//! A replica's heartbeat word, the one word the others read of it all the time: its
//! snapshot point (every instance below it is in its latest snapshot, [`super::ring`]),
//! the leader it trusts (for leases, see [`super::lease`]), how far past its point it has
//! applied, and its heartbeat counter, so that one read tells whether it is alive, how far
//! it could serve a snapshot, how far the log reached, whom it follows, and whether it
//! could lead itself. `point:34 | trust:6 | version:8 | past:8 | unable:1 | beat:7`. The trust version grows (wrapping) every time the trusted leader changes, so
//! that two reads showing the same leader and version prove the replica trusted that leader
//! all along in between. `past` (saturating) makes `point + past` a lower bound of the
//! replica's next slot to apply: a replica Ω chose learns from it that the others are ahead
//! of it (rule (term catch-up)). `unable` is set while the replica cannot lead (it does not
//! vote in its next slot): rule (able leader), [`super::omega`]. The counter wraps; Ω only
//! needs the word to change every period.

/// Bits of the flag and the heartbeat counter together.
pub const BEAT_BITS: u32 = 8;
/// Bits of how far past its point the replica has applied.
pub const PAST_BITS: u32 = 8;
/// The largest `past` a word holds: more is written as this (a lower bound).
pub const PAST_MAX: u64 = (1 << PAST_BITS) - 1;
/// The flag saying the replica cannot lead, above the counter (so a replica that can
/// lead writes the same word as before the flag existed).
const UNABLE: u64 = 1 << (BEAT_BITS - 1);
/// Bits of the trust version.
pub const VERSION_BITS: u32 = 8;
/// Bits of the trusted leader (0: none, 1 + id otherwise).
pub const TRUST_BITS: u32 = 6;
/// Bits of the snapshot point.
pub const POINT_BITS: u32 = 64 - BEAT_BITS - PAST_BITS - VERSION_BITS - TRUST_BITS;

/// What a heartbeat word says.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Heartbeat {
    /// The replica's snapshot point.
    pub point: u64,
    /// The leader it trusts.
    pub trust: Option<u16>,
    /// How far past `point` it has applied, at most [`PAST_MAX`] (a lower bound then).
    pub past: u64,
    /// How many times (wrapping) its trusted leader changed.
    pub version: u8,
    /// It cannot lead now (rule (able leader)).
    pub unable: bool,
    /// Its counter (wrapping at `BEAT_BITS - 1` bits).
    pub beat: u64,
}

impl Heartbeat {
    /// The word.
    pub fn word(self) -> u64 {
        assert!(self.point < 1 << POINT_BITS, "a snapshot point of 34 bits");
        let trust = self.trust.map_or(0, |l| u64::from(l) + 1);
        assert!(trust < 1 << TRUST_BITS, "a trusted leader of at most 62");
        let beat = self.beat & (UNABLE - 1) | if self.unable { UNABLE } else { 0 };
        let past = self.past.min(PAST_MAX) << BEAT_BITS;
        let version = u64::from(self.version) << (BEAT_BITS + PAST_BITS);
        let word = self.point << (BEAT_BITS + PAST_BITS + VERSION_BITS + TRUST_BITS)
            | trust << (BEAT_BITS + PAST_BITS + VERSION_BITS)
            | version
            | past
            | beat;
        debug_assert_eq!(Heartbeat::of(word).point, self.point, "round trip");
        debug_assert_eq!(Heartbeat::of(word).unable, self.unable, "round trip");
        word
    }

    /// What `word` says.
    pub fn of(word: u64) -> Heartbeat {
        let trust = (word >> (BEAT_BITS + PAST_BITS + VERSION_BITS)) & ((1 << TRUST_BITS) - 1);
        Heartbeat {
            point: word >> (BEAT_BITS + PAST_BITS + VERSION_BITS + TRUST_BITS),
            trust: trust.checked_sub(1).map(|l| l as u16),
            past: (word >> BEAT_BITS) & PAST_MAX,
            version: (word >> (BEAT_BITS + PAST_BITS)) as u8,
            unable: word & UNABLE != 0,
            beat: word & (UNABLE - 1),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_heartbeat_word_round_trips_and_its_counter_wraps() {
        let h = Heartbeat {
            point: 123,
            trust: Some(4),
            past: 300,
            version: 201,
            unable: true,
            beat: (1 << BEAT_BITS) + UNABLE + 5,
        };
        let back = Heartbeat::of(h.word());
        assert_eq!(
            (back.point, back.trust, back.past, back.version, back.unable),
            (123, Some(4), PAST_MAX, 201, true),
            "past saturates"
        );
        assert_eq!(back.beat, 5, "the counter wraps below the flag");
        let able = Heartbeat { unable: false, ..h };
        assert!(!Heartbeat::of(able.word()).unable);
        assert_eq!(h.word() - able.word(), UNABLE, "one bit apart");
        let none = Heartbeat {
            point: 0,
            trust: None,
            past: 0,
            version: 0,
            unable: false,
            beat: 1,
        };
        assert_eq!(Heartbeat::of(none.word()).trust, None);
        assert_eq!(none.word(), 1, "a young replica's word is its counter");
    }
}
