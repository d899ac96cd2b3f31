//! The leader's window: its open slots in a ring of [`SPAN`] records indexed by
//! `slot & (SPAN - 1)`, visited in slot order.
//!
//! Lemma (window span): every slot of a leader's window lies in `[prefix, next_slot)`
//! and `next_slot ≤ prefix + pipeline` with `pipeline < SPAN` (the configuration's bound),
//! so no two open slots share a record. A look-up is an index and a compare, where the map
//! it replaces walked a tree at every one of the four to six look-ups a slot takes per
//! turn.
//!
//! The bounds are canonical — `first` the lowest open slot and `end` one past the highest,
//! both 0 when nothing is open — so that two windows holding the same slots compare and
//! hash equal whatever their history (the explorer tells states apart by them).

/// Records in the ring: above the longest pipeline (15) a configuration accepts.
pub(super) const SPAN: u64 = 16;

/// Open slots and their records, in slot order.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) struct Window<T> {
    records: [Option<T>; SPAN as usize],
    /// The lowest open slot (0 when none is).
    first: u64,
    /// One past the highest open slot (0 when none is).
    end: u64,
}

impl<T> Default for Window<T> {
    fn default() -> Self {
        Window {
            records: std::array::from_fn(|_| None),
            first: 0,
            end: 0,
        }
    }
}

fn at(slot: u64) -> usize {
    (slot & (SPAN - 1)) as usize
}

impl<T> Window<T> {
    /// Whether no slot is open.
    pub(super) fn is_empty(&self) -> bool {
        self.end == 0
    }

    /// Whether `slot` is open.
    pub(super) fn contains(&self, slot: u64) -> bool {
        self.get(slot).is_some()
    }

    /// The record of `slot`, if it is open.
    pub(super) fn get(&self, slot: u64) -> Option<&T> {
        if slot < self.first || slot >= self.end {
            return None;
        }
        self.records[at(slot)].as_ref()
    }

    /// The record of `slot`, if it is open.
    pub(super) fn get_mut(&mut self, slot: u64) -> Option<&mut T> {
        if slot < self.first || slot >= self.end {
            return None;
        }
        self.records[at(slot)].as_mut()
    }

    /// Opens `slot` with `record`.
    pub(super) fn insert(&mut self, slot: u64, record: T) {
        let (first, end) = match self.is_empty() {
            true => (slot, slot + 1),
            false => (self.first.min(slot), self.end.max(slot + 1)),
        };
        assert!(
            end - first <= SPAN && !self.contains(slot),
            "lemma (window span): slot {slot} of a window of {}..{}",
            self.first,
            self.end
        );
        self.records[at(slot)] = Some(record);
        (self.first, self.end) = (first, end);
        assert!(self.contains(slot), "an inserted slot is open");
    }

    /// Closes `slot`: its record, if it was open.
    pub(super) fn remove(&mut self, slot: u64) -> Option<T> {
        if slot < self.first || slot >= self.end {
            return None;
        }
        let record = self.records[at(slot)].take()?;
        // Canonical bounds: the lowest and one past the highest slot still open.
        while self.first < self.end && self.records[at(self.first)].is_none() {
            self.first += 1;
        }
        while self.end > self.first && self.records[at(self.end - 1)].is_none() {
            self.end -= 1;
        }
        if self.first == self.end {
            (self.first, self.end) = (0, 0);
        }
        assert!(!self.contains(slot), "a removed slot is closed");
        Some(record)
    }

    /// The lowest open slot at or above `from`.
    pub(super) fn next_from(&self, from: u64) -> Option<u64> {
        (from.max(self.first)..self.end).find(|&s| self.records[at(s)].is_some())
    }

    /// The open slots and their records, in slot order.
    pub(super) fn iter(&self) -> impl Iterator<Item = (u64, &T)> + '_ {
        (self.first..self.end).filter_map(|s| self.records[at(s)].as_ref().map(|r| (s, r)))
    }

    /// The open slots above `slot` and their records, in slot order.
    pub(super) fn above(&self, slot: u64) -> impl Iterator<Item = (u64, &T)> + '_ {
        self.iter().filter(move |&(s, _)| s > slot)
    }

    /// The records, in slot order.
    pub(super) fn values(&self) -> impl Iterator<Item = &T> + '_ {
        self.iter().map(|(_, r)| r)
    }

    /// The records, in slot order.
    pub(super) fn values_mut(&mut self) -> impl Iterator<Item = &mut T> + '_ {
        // Every open slot has its own record (lemma (window span)): the whole ring in
        // slot order is the records from `first` on, wrapping.
        let split = at(self.first);
        let (low, high) = self.records.split_at_mut(split);
        high.iter_mut().chain(low).filter_map(Option::as_mut)
    }

    /// The records, in slot order, the window emptied.
    pub(super) fn into_values(mut self) -> impl Iterator<Item = T> {
        // As `values_mut`: the ring from `first` on, wrapping.
        self.records.rotate_left(at(self.first));
        self.records.into_iter().flatten()
    }
}

impl<T> std::ops::Index<u64> for Window<T> {
    type Output = T;

    fn index(&self, slot: u64) -> &T {
        self.get(slot).expect("an open slot of the window")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    proptest! {
        /// The ring against the map it replaced: any sequence of opening the next slots
        /// and closing open ones (within a span) holds the same slots in the same order,
        /// and equal contents are equal windows. An empty window always opens the next
        /// slot, so every run opens at least one.
        #[test]
        fn the_window_is_the_map_it_replaced(
            steps in prop::collection::vec((any::<bool>(), 0u64..SPAN), 1..200),
        ) {
            let mut window = Window::default();
            let mut map = BTreeMap::new();
            let mut next = 0u64;
            for (open, pick) in steps {
                let low = map.keys().next().copied().unwrap_or(next);
                if (open || map.is_empty()) && next < low + SPAN {
                    window.insert(next, next * 7);
                    map.insert(next, next * 7);
                    next += 1;
                } else if let Some(&slot) = map.keys().nth(pick as usize % map.len().max(1)) {
                    prop_assert_eq!(window.remove(slot), map.remove(&slot));
                }
                prop_assert_eq!(window.is_empty(), map.is_empty());
                let ring: Vec<_> = window.iter().map(|(s, &r)| (s, r)).collect();
                let tree: Vec<_> = map.iter().map(|(&s, &r)| (s, r)).collect();
                prop_assert_eq!(&ring, &tree);
                let mutable: Vec<u64> = window.values_mut().map(|r| *r).collect();
                let values: Vec<u64> = tree.iter().map(|&(_, r)| r).collect();
                prop_assert_eq!(&mutable, &values);
                let owned: Vec<u64> = window.clone().into_values().collect();
                prop_assert_eq!(&owned, &values);
                for s in next.saturating_sub(2 * SPAN)..next + SPAN {
                    prop_assert_eq!(window.get(s), map.get(&s));
                    prop_assert_eq!(window.next_from(s), map.range(s..).next().map(|(&k, _)| k));
                }
                let mut rebuilt = Window::default();
                for (s, r) in &map {
                    rebuilt.insert(*s, *r);
                }
                prop_assert_eq!(&rebuilt, &window, "canonical: equal contents, equal windows");
            }
        }
    }
}
