//! [`Words`]: the payload of a multi-word put, captured when it is posted.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::sync::Arc;

/// The words an [`Op::PutWords`](crate::Op::PutWords) writes: shared, so that the same
/// payload can go to several nodes without a copy per post, and compared and hashed by
/// content (the explorer identifies states by what they hold).
///
/// [`Words::refill`] reuses the buffer once no backend holds it any more, so a process that
/// keeps a few `Words` of its own posts without allocating in the steady state.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Words(Arc<Vec<u64>>);

impl Words {
    /// The words, in address order.
    pub fn as_slice(&self) -> &[u64] {
        &self.0
    }

    /// How many words.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether there is none (a zero-length write, which RDMA allows).
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Replaces the words with `words`: in place when nothing else holds this buffer (a
    /// backend drops its copy once the put is posted, or, in the emulator, once it landed),
    /// else in a new buffer.
    pub fn refill(&mut self, words: impl IntoIterator<Item = u64>) {
        match Arc::get_mut(&mut self.0) {
            Some(v) => {
                v.clear();
                v.extend(words);
            }
            None => self.0 = Arc::new(words.into_iter().collect()),
        }
    }
}

impl From<Vec<u64>> for Words {
    fn from(words: Vec<u64>) -> Words {
        Words(Arc::new(words))
    }
}

impl Serialize for Words {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.as_slice().serialize(s)
    }
}

impl<'de> Deserialize<'de> for Words {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Words, D::Error> {
        Vec::<u64>::deserialize(d).map(Words::from)
    }
}

#[cfg(test)]
mod tests {
    use super::Words;

    #[test]
    fn refill_reuses_an_unshared_buffer_and_spares_a_shared_one() {
        let mut w = Words::from(vec![1, 2, 3]);
        let before = w.as_slice().as_ptr();
        w.refill([4, 5]);
        assert_eq!(w.as_slice(), &[4, 5]);
        assert_eq!(w.as_slice().as_ptr(), before, "unshared: the same buffer");
        let held = w.clone();
        w.refill([6]);
        assert_eq!(held.as_slice(), &[4, 5], "a holder keeps what it was given");
        assert_eq!(w.as_slice(), &[6]);
        assert_ne!(w.as_slice().as_ptr(), before, "shared: a new buffer");
    }

    #[test]
    fn equal_by_content() {
        assert_eq!(Words::from(vec![7, 8]), Words::from(vec![7, 8]));
        assert_ne!(Words::from(vec![7, 8]), Words::from(vec![8, 7]));
    }
}
