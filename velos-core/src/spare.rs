//! Room kept for reuse inside a state machine's state, outside its meaning.
//!
//! The engine's hot path reuses allocations (a decided slot's proposer becomes the next
//! slot's) so that a decision allocates nothing. What waits for reuse is not state: two
//! replicas that differ only in their spare room are the same replica, and the explorer
//! must not tell them apart. So a [`Spare`] compares equal to every other, hashes to
//! nothing, and a clone starts empty.

use std::hash::{Hash, Hasher};

/// Values kept for reuse; never part of the state that holds them.
#[derive(Debug)]
pub(crate) struct Spare<T>(Vec<T>);

impl<T> Spare<T> {
    /// Keeps `value` for reuse.
    pub(crate) fn keep(&mut self, value: T) {
        self.0.push(value);
    }

    /// A value kept earlier, if any.
    pub(crate) fn take(&mut self) -> Option<T> {
        self.0.pop()
    }
}

impl<T> Default for Spare<T> {
    fn default() -> Self {
        Spare(Vec::new())
    }
}

impl<T> Clone for Spare<T> {
    /// A clone starts with no spare room: what waits for reuse is not copied.
    fn clone(&self) -> Self {
        Spare::default()
    }
}

impl<T> PartialEq for Spare<T> {
    fn eq(&self, _: &Self) -> bool {
        true // spare room is not state
    }
}

impl<T> Eq for Spare<T> {}

impl<T> Hash for Spare<T> {
    fn hash<H: Hasher>(&self, _: &mut H) {}
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::hash_map::DefaultHasher;

    fn hash(s: &Spare<u32>) -> u64 {
        let mut h = DefaultHasher::new();
        s.hash(&mut h);
        h.finish()
    }

    #[test]
    fn spare_room_is_not_state() {
        let mut a = Spare::default();
        a.keep(7);
        let b = Spare::default();
        assert_eq!(a, b);
        assert_eq!(hash(&a), hash(&b));
        assert_eq!(a.clone().take(), None, "a clone starts empty");
        assert_eq!(a.take(), Some(7));
        assert_eq!(a.take(), None);
    }
}
