//! The set of queue pairs in use, kept beside the machine so that a step costs nothing for
//! idle queue pairs: a cluster of 64 nodes × 64 threads has 4096 queue pairs, of which a
//! handful hold anything at any time.
//!
//! The set is *derived* state: a queue pair is in it whenever its pipe, `rW` or `lW` is
//! non-empty (it may also hold queue pairs that have just emptied, which every reader
//! treats as idle, since each looks at the queues themselves). It is therefore left out
//! of equality and hashing, so it never splits the explorer's states, and it never
//! changes what is enabled or in which order: it only lets the machine skip queue pairs
//! that would contribute nothing.

use std::fmt;
use std::hash::{Hash, Hasher};

/// Words kept inline: up to 128 queue pairs (every litmus test) clone without allocating.
const INLINE: usize = 2;

/// A set of queue-pair indices, as a bitmap.
#[derive(Clone)]
pub(crate) struct ActiveQps {
    bits: Bits,
}

#[derive(Clone)]
enum Bits {
    Inline([u64; INLINE]),
    Heap(Vec<u64>),
}

impl ActiveQps {
    /// The empty set.
    pub(crate) fn new() -> ActiveQps {
        ActiveQps {
            bits: Bits::Inline([0; INLINE]),
        }
    }

    fn words(&self) -> &[u64] {
        match &self.bits {
            Bits::Inline(w) => w,
            Bits::Heap(w) => w,
        }
    }

    fn words_mut(&mut self) -> &mut [u64] {
        match &mut self.bits {
            Bits::Inline(w) => w,
            Bits::Heap(w) => w,
        }
    }

    /// Makes room for queue pairs `0..count`.
    pub(crate) fn reserve(&mut self, count: usize) {
        let need = count.div_ceil(64);
        if need <= self.words().len() {
            return;
        }
        let mut words = self.words().to_vec();
        words.resize(need, 0);
        self.bits = Bits::Heap(words);
    }

    /// Adds or removes queue pair `q`.
    pub(crate) fn set(&mut self, q: usize, in_use: bool) {
        let word = &mut self.words_mut()[q / 64];
        let bit = 1u64 << (q % 64);
        if in_use {
            *word |= bit;
        } else {
            *word &= !bit;
        }
    }

    /// Empties the set.
    pub(crate) fn clear(&mut self) {
        self.words_mut().fill(0);
    }

    /// Whether queue pair `q` is in the set.
    #[cfg(debug_assertions)]
    pub(crate) fn contains(&self, q: usize) -> bool {
        self.words()
            .get(q / 64)
            .is_some_and(|w| w & (1u64 << (q % 64)) != 0)
    }

    /// The members in `range`, in increasing order.
    pub(crate) fn iter_range(&self, range: std::ops::Range<usize>) -> Members<'_> {
        let words = self.words();
        let end = range.end.min(words.len() * 64);
        let start = range.start.min(end);
        let first = start / 64;
        let current = if start < end {
            words[first] & (!0u64 << (start % 64))
        } else {
            0
        };
        Members {
            words,
            index: first,
            current,
            end,
        }
    }

    /// Every member, in increasing order.
    pub(crate) fn iter(&self) -> Members<'_> {
        self.iter_range(0..usize::MAX)
    }
}

/// The members of an [`ActiveQps`] in a range, in increasing order.
pub(crate) struct Members<'a> {
    words: &'a [u64],
    index: usize,
    current: u64,
    end: usize,
}

impl Iterator for Members<'_> {
    type Item = usize;

    fn next(&mut self) -> Option<usize> {
        loop {
            if self.current != 0 {
                let q = self.index * 64 + self.current.trailing_zeros() as usize;
                self.current &= self.current - 1;
                return (q < self.end).then_some(q);
            }
            self.index += 1;
            if self.index * 64 >= self.end {
                return None;
            }
            self.current = self.words[self.index];
        }
    }
}

/// Derived from the queue pairs: equal queue pairs give equal sets, so the set adds
/// nothing to a comparison.
impl PartialEq for ActiveQps {
    fn eq(&self, _other: &Self) -> bool {
        true
    }
}

impl Eq for ActiveQps {}

/// Derived from the queue pairs, which are hashed already.
impl Hash for ActiveQps {
    fn hash<H: Hasher>(&self, _state: &mut H) {}
}

impl fmt::Debug for ActiveQps {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_set().entries(self.iter()).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn members_in_order_and_in_range() {
        let mut s = ActiveQps::new();
        s.reserve(300);
        for q in [0, 5, 63, 64, 127, 128, 200, 299] {
            s.set(q, true);
        }
        s.set(5, false);
        assert_eq!(
            s.iter().collect::<Vec<_>>(),
            vec![0, 63, 64, 127, 128, 200, 299]
        );
        assert_eq!(s.iter_range(63..128).collect::<Vec<_>>(), vec![63, 64, 127]);
        assert_eq!(s.iter_range(1..63).count(), 0);
        assert_eq!(s.iter_range(200..201).collect::<Vec<_>>(), vec![200]);
        assert_eq!(s.iter_range(300..400).count(), 0);
    }

    #[test]
    fn small_sets_stay_inline_and_compare_equal() {
        let mut a = ActiveQps::new();
        a.reserve(128);
        assert!(matches!(a.bits, Bits::Inline(_)));
        a.set(3, true);
        assert_eq!(a, ActiveQps::new(), "derived state never splits states");
        a.reserve(129);
        assert!(matches!(a.bits, Bits::Heap(_)));
        assert_eq!(a.iter().collect::<Vec<_>>(), vec![3]);
    }
}
