//! Small pseudo-random delays that diversify the interleavings of randomised runs.

use std::hint;
use std::thread;

/// A per-thread splitmix64 generator (owned here, so a seed means the same delays in every
/// version) and the delays it picks.
#[derive(Clone, Debug)]
pub(crate) struct Jitter {
    state: u64,
}

impl Jitter {
    /// The generator of stream `stream` (one per thread) for the fabric seed `seed`.
    pub(crate) fn new(seed: u64, stream: u64) -> Jitter {
        let mut mixer = Jitter {
            state: seed ^ stream.wrapping_mul(0xD1B5_4A32_D192_ED03),
        };
        Jitter {
            state: mixer.next_u64(),
        }
    }

    /// The next 64 pseudo-random bits.
    pub(crate) fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A pseudo-random index below `bound` (which must be positive).
    pub(crate) fn below(&mut self, bound: usize) -> usize {
        assert!(bound > 0, "empty range");
        (self.next_u64() % bound as u64) as usize
    }

    /// Nothing, a short spin, or a yield or two, chosen at random.
    pub(crate) fn delay(&mut self) {
        let bits = self.next_u64();
        match bits % 4 {
            0 => {}
            1 => (0..(bits >> 8) % 64).for_each(|_| hint::spin_loop()),
            2 => thread::yield_now(),
            _ => (0..1 + (bits >> 8) % 3).for_each(|_| thread::yield_now()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Jitter;

    #[test]
    fn streams_are_deterministic_and_distinct() {
        let draw = |seed, stream| {
            let mut jitter = Jitter::new(seed, stream);
            (0..4).map(|_| jitter.next_u64()).collect::<Vec<_>>()
        };
        assert_eq!(draw(7, 1), draw(7, 1));
        assert_ne!(draw(7, 1), draw(7, 2));
        assert_ne!(draw(7, 1), draw(8, 1));
    }

    #[test]
    fn below_stays_in_range() {
        let mut jitter = Jitter::new(1, 0);
        assert!((0..1000).all(|_| jitter.below(3) < 3));
    }
}
